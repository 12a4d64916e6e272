import { ERROR_CATALOGUE, ModelmuxError, toModelmuxError, type ErrorBody, type ErrorCode } from '../common/errors.js';
import { publicName, type EnsembleSpec, type ModelRoute, type SequenceSpec, type SequenceStep } from '../common/model-route.js';
import { HEADER_REQUEST_ID } from '../common/names.js';
import type { RequestForm } from '../common/request-grammar.js';
import { errorOfAnswer, parseCompositeRequest, parseInferAnswer, requestTensors, stringify, type V2Request } from './composite-body.js';
import { sendMember, type MemberAnswer, type MemberCall } from './composite-member.js';
import { compositeMetadata, parseModelMetadata, type ModelMetadata } from './composite-metadata.js';
import { CompositeMetrics, type MemberOutcome } from './composite-metrics.js';
import type { DownstreamRequest, DownstreamResponse } from './downstream.js';
import { EnsembleTally, type MemberSettlement, type QuorumDecision } from './ensemble-quorum.js';
import { errorHeaders } from './error-headers.js';
import { REQUEST_ID } from './exchange.js';
import type { RouterProxy } from './proxy.js';
import { readBody } from './whole-body.js';
import { rawHeaderValue } from './route-rewrite.js';
import type { Route } from './route-table.js';
import { stepInputs, type InputSpec } from './sequence-mapping.js';
import { combineOutputs, type V2Tensor } from './tensor-combine.js';

/** The models that made a composite answer, comma-separated, in member (or step) order. */
export const HEADER_MEMBERS = 'x-modelmux-members';

/** What the route resolution found for the requested name. */
export interface CompositeTarget {
  /** The pool's route (prefix and balancer) the request came in on: members are its models. */
  route: Route;
  /** The ensemble or sequence route the requested public name resolved to. */
  modelRoute: ModelRoute;
  /** The request's form, for the access log. */
  form?: RequestForm | undefined;
}

/**
 * Serves a request for an ensemble or a sequence route (ADR 0035): reads and checks its V2 JSON
 * body, sends one request per member or step through the router's own exchange (placed as any
 * request is), and answers with the combined (or last) outputs, `parameters.members` and the
 * `x-modelmux-members` header. Never throws for the request's own failures: every one is
 * answered with a catalogue error.
 */
export function serveComposite(proxy: RouterProxy, req: DownstreamRequest, res: DownstreamResponse, target: CompositeTarget): void {
  new CompositeRequest(proxy, req, res, target).start();
}

type StepResult = { ok: true; outputs: V2Tensor[] } | { ok: false; code: ErrorCode; message: string };

class CompositeRequest {
  private readonly started: number;
  private readonly requestId: string;
  private readonly name: string;
  private readonly metrics: CompositeMetrics;
  private finished = false;
  private budgeted = 0;
  private timer: NodeJS.Timeout | undefined;
  /** Cancels of the member requests not answered yet. */
  private readonly running = new Set<() => void>();
  /** The sequence step under way, for the deadline's message. */
  private stepRunning = 'step 1';
  /** Members running when the composite ends, with the outcome they are counted as. */
  private onEnd: ((outcome: MemberOutcome) => void) | undefined;

  constructor(
    private readonly proxy: RouterProxy,
    private readonly req: DownstreamRequest,
    private readonly res: DownstreamResponse,
    private readonly target: CompositeTarget,
  ) {
    this.started = proxy.clock.now();
    const given = rawHeaderValue(req.rawHeaders, HEADER_REQUEST_ID);
    this.requestId = given !== undefined && REQUEST_ID.test(given) ? given : proxy.requestIds.next();
    this.name = publicName(target.modelRoute);
    this.metrics = CompositeMetrics.for(proxy.metrics);
  }

  start(): void {
    this.res.on('close', this.onClientClose);
    const method = this.req.method ?? 'GET';
    if (method === 'GET' || method === 'HEAD') {
      const path = this.req.url ?? '/';
      void this.describe(/\/ready(\?|$)/.test(path)).catch((err: unknown) => this.fail(err));
      return;
    }
    const { limits, buffered } = this.proxy;
    const declared = Number(rawHeaderValue(this.req.rawHeaders, 'content-length') ?? '0');
    if (declared > limits.maxBodyBytes) return this.fail(new ModelmuxError('body_too_large', `the body is ${declared} bytes; the limit is ${limits.maxBodyBytes}`));
    if (declared > buffered.available) return this.fail(buffered.fullError());
    const take = (bytes: number): void => {
      if (!buffered.take(bytes)) throw buffered.fullError();
      this.budgeted += bytes;
    };
    readBody(limits, this.req, this.res, take).then(
      (body) => {
        if (this.finished) return;
        try {
          const request = parseCompositeRequest(body, rawHeaderValue(this.req.rawHeaders, 'inference-header-content-length'));
          const { ensemble, sequence } = this.target.modelRoute.spec;
          const deadlineMs = Math.min(limits.requestTimeoutMs, ensemble?.deadlineMs ?? Number.POSITIVE_INFINITY);
          this.timer = setTimeout(() => this.expire(deadlineMs < limits.requestTimeoutMs ? `the ensemble deadline of ${deadlineMs} ms passed` : `the request deadline of ${deadlineMs} ms passed`), deadlineMs);
          if (ensemble !== undefined) this.ensemble(ensemble, body, request);
          else if (sequence !== undefined) void this.sequence(sequence, body, request).catch((err: unknown) => this.fail(err));
          else throw new ModelmuxError('internal', `route ${this.name} is neither an ensemble nor a sequence`);
        } catch (err) {
          this.fail(err);
        }
      },
      (err: unknown) => this.fail(err),
    );
  }

  // --- ensembles --------------------------------------------------------------------------------

  private ensemble(spec: EnsembleSpec, body: Buffer, request: V2Request): void {
    const names = spec.members.map((m) => m.model);
    const tally = new EnsembleTally(names, spec.combine, spec.quorum);
    const outputs: V2Tensor[][] = [];
    const decide = (d: QuorumDecision, pendingAs: MemberOutcome): void => {
      if (d.kind === 'wait' || this.finished) return;
      this.onEnd = undefined;
      for (const i of tally.pending) this.counted(names[i] as string, pendingAs, undefined);
      if (d.kind === 'fail') return this.fail(d.error);
      try {
        const members = d.members.map((i) => ({ member: names[i] as string, outputs: outputs[i] as V2Tensor[] }));
        this.answer(combineOutputs(members, spec.combine, spec.outputs), request, members.map((m) => m.member));
      } catch (err) {
        this.fail(err);
      }
    };
    this.expire = (why) => decide(tally.expire(why), 'deadline');
    this.onEnd = (outcome) => {
      for (const i of tally.pending) this.counted(names[i] as string, outcome, undefined);
    };
    names.forEach((model, i) => {
      if (this.finished) return;
      const sent = this.proxy.clock.now();
      void this.send(model, 'infer', body).then((a) => {
        if (this.finished) return;
        const r = this.result(a, 'ensemble_mismatch');
        this.counted(model, r.ok ? 'ok' : 'failed', (this.proxy.clock.now() - sent) / 1000);
        let s: MemberSettlement = { ok: true };
        if (r.ok) outputs[i] = r.outputs;
        else s = { ok: false, code: r.code, message: r.message };
        decide(tally.settle(i, s), 'cancelled');
      });
    });
  }

  // --- sequences --------------------------------------------------------------------------------

  private async sequence(spec: SequenceSpec, body: Buffer, request: V2Request): Promise<void> {
    const steps = spec.steps;
    // Every later step's inputs come from its metadata, asked at once: this also loads each
    // step's model while the steps before it run.
    const metadata = steps.slice(1).map((s) => this.send(s.model, 'metadata', null));
    const first = steps[0] as SequenceStep;
    // The request's `outputs` name outputs of the last step.
    const firstBody = request.outputs === undefined ? body : Buffer.from(stringify({ ...request, outputs: undefined }));
    let outputs = await this.step(1, first, firstBody);
    const requestInputs = requestTensors(request);
    for (let n = 2; n <= steps.length; n++) {
      const step = steps[n - 1] as SequenceStep;
      const previous = steps[n - 2] as SequenceStep;
      this.stepRunning = `step ${n} (${step.model})`;
      const meta = await metadata[n - 2];
      if (this.finished || outputs === undefined || meta === undefined) return;
      const r = this.metadataOf(n, step, meta);
      const inputs = stepInputs(n, step, r, { previousStep: n - 1, previousModel: previous.model, outputs, requestInputs });
      const last = n === steps.length;
      const payload = { ...(request.id !== undefined ? { id: request.id } : {}), inputs, ...(last && request.outputs !== undefined ? { outputs: request.outputs.map((o) => ({ name: o.name })) } : {}) };
      outputs = await this.step(n, step, Buffer.from(stringify(payload)));
    }
    if (this.finished || outputs === undefined) return;
    this.answer(outputs, request, steps.map((s) => s.model));
  }

  /** Runs step `n`; undefined when the composite ended meanwhile. */
  private async step(n: number, step: SequenceStep, body: Buffer): Promise<V2Tensor[] | undefined> {
    const sent = this.proxy.clock.now();
    this.stepRunning = `step ${n} (${step.model})`;
    this.onEnd = (outcome) => this.counted(step.model, outcome, undefined);
    const a = await this.send(step.model, 'infer', body);
    if (this.finished) return undefined;
    this.onEnd = undefined;
    const r = this.result(a, 'sequence_step_failed');
    this.counted(step.model, r.ok ? 'ok' : 'failed', (this.proxy.clock.now() - sent) / 1000);
    if (r.ok) return r.outputs;
    throw stepError(n, step, r.code, r.message);
  }

  private metadataOf(n: number, step: SequenceStep, a: MemberAnswer): InputSpec[] {
    try {
      return this.memberMetadata(a, 'no metadata: ').inputs;
    } catch (err) {
      const e = toModelmuxError(err);
      throw stepError(n, step, e.code, e.message);
    }
  }

  // --- metadata and readiness ---------------------------------------------------------------------

  /**
   * `GET …/v2/models/{route}` (compositeMetadata), or `…/ready`: an ensemble is ready when at
   * least its quorum of members is, a sequence when every step is, as the router places their
   * readiness requests (so, on a replica that holds each model if any does).
   */
  private async describe(ready: boolean): Promise<void> {
    const spec = this.target.modelRoute.spec;
    const models = spec.ensemble?.members.map((m) => m.model) ?? spec.sequence?.steps.map((s) => s.model) ?? [];
    if (ready) {
      const answers = await Promise.all(models.map((m) => this.send(m, 'ready', null)));
      const readyCount = answers.filter((a) => a.ok && a.status === 200).length;
      const needed = spec.ensemble === undefined ? models.length : new EnsembleTally(models, spec.ensemble.combine, spec.ensemble.quorum).quorum;
      return this.respond(readyCount >= needed ? 200 : 503, { name: this.name, ready: readyCount >= needed });
    }
    const asked = spec.sequence === undefined ? [models[0] as string] : [models[0] as string, models[models.length - 1] as string];
    const metadata = await Promise.all(asked.map(async (m) => this.memberMetadata(await this.send(m, 'metadata', null), `${m}: `)));
    this.respond(200, compositeMetadata(this.name, spec, metadata[0] as ModelMetadata, metadata[1]));
  }

  /** A member's metadata answer; its error (its message after `prefix`) when it has none. */
  private memberMetadata(a: MemberAnswer, prefix: string): ModelMetadata {
    if (!a.ok) throw new ModelmuxError(a.error.code, `${prefix}${a.error.message}`);
    if (a.status !== 200) {
      const e = errorOfAnswer(a.status, a.body);
      throw new ModelmuxError(e.code, `${prefix}${e.message}`);
    }
    try {
      return parseModelMetadata(a.body);
    } catch (err) {
      throw new ModelmuxError('upstream_unavailable', `${prefix}${err instanceof Error ? err.message : String(err)}`);
    }
  }

  // --- members ----------------------------------------------------------------------------------

  /** One member request; never settles once cancelled (the composite then has ended). */
  private send(model: string, action: MemberCall['action'], body: Buffer | null): Promise<MemberAnswer> {
    return new Promise((resolve) => {
      let answered = false;
      let cancel: (() => void) | undefined;
      const call = { prefix: this.target.route.prefix, model, action, body, requestId: this.requestId, clientHeaders: this.req.rawHeaders, remoteAddress: this.req.socket.remoteAddress };
      cancel = sendMember(this.proxy, call, (a) => {
        answered = true;
        if (cancel !== undefined) this.running.delete(cancel);
        resolve(a);
      });
      if (!answered) this.running.add(cancel);
    });
  }

  /** A member's answer as outputs, or its error; an answer that is no V2 answer is `invalid`. */
  private result(a: MemberAnswer, invalid: ErrorCode): StepResult {
    if (!a.ok) return { ok: false, code: a.error.code, message: a.error.message };
    if (a.status !== 200) return { ok: false, ...errorOfAnswer(a.status, a.body) };
    try {
      return { ok: true, outputs: parseInferAnswer(a.body) };
    } catch (err) {
      return { ok: false, code: invalid, message: err instanceof Error ? err.message : String(err) };
    }
  }

  private counted(member: string, outcome: MemberOutcome, seconds: number | undefined): void {
    this.metrics.member(this.target.route.prefix, this.name, member, outcome, seconds);
  }

  // --- endings ----------------------------------------------------------------------------------

  /** The deadline passed: an ensemble answers with what it has if it may (replaced by `ensemble`). */
  private expire = (why: string): void => {
    this.fail(new ModelmuxError('timeout', `${why} while ${this.stepRunning} ran`), 'deadline');
  };

  private answer(outputs: V2Tensor[], request: V2Request, members: string[]): void {
    this.respond(200, { model_name: this.name, ...(request.id !== undefined ? { id: request.id } : {}), outputs, parameters: { members } }, [HEADER_MEMBERS, members.join(',')]);
  }

  private respond(status: number, body: unknown, headers: string[] = []): void {
    if (this.finished) return;
    if (!this.res.headersSent && !this.res.destroyed) {
      this.res.writeHead(status, ['content-type', 'application/json', HEADER_REQUEST_ID, this.requestId, ...headers]).end(stringify(body));
    }
    this.finish(status, undefined, 'cancelled');
  }

  private readonly onClientClose = (): void => {
    if (this.finished || this.res.writableFinished) return;
    this.fail(new ModelmuxError('timeout', 'the client closed the connection before the answer'));
  };

  private fail(err: unknown, runningAs: MemberOutcome = 'cancelled'): void {
    if (this.finished) return;
    const e = toModelmuxError(err);
    if (e.code === 'internal') this.proxy.log.error('composite request failed', { requestId: this.requestId, route: this.name, reason: e.message });
    if (!this.res.headersSent && !this.res.destroyed) {
      const payload: ErrorBody = { error: e.code, message: e.message, requestId: this.requestId };
      const headers = ['content-type', 'application/json', HEADER_REQUEST_ID, this.requestId];
      headers.push(...errorHeaders(e.code));
      this.res.writeHead(e.status, headers).end(JSON.stringify(payload));
    } else this.res.destroy();
    this.finish(e.status, e.code, runningAs);
  }

  private finish(status: number, error: ErrorCode | undefined, runningAs: MemberOutcome): void {
    this.finished = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.onEnd?.(runningAs);
    this.onEnd = undefined;
    for (const cancel of this.running) cancel();
    this.running.clear();
    this.proxy.buffered.release(this.budgeted);
    this.budgeted = 0;
    const ms = this.proxy.clock.now() - this.started;
    const prefix = this.target.route.prefix;
    this.proxy.metrics.forRoute(prefix).answered(status, ms / 1000);
    const url = this.req.url ?? '/';
    const q = url.indexOf('?');
    this.proxy.access.request({
      requestId: this.requestId,
      method: this.req.method ?? 'POST',
      path: q === -1 ? url : url.slice(0, q),
      route: prefix,
      model: this.name,
      form: this.target.form,
      replica: undefined,
      placement: undefined,
      waitedMs: undefined,
      tries: undefined,
      error,
      status,
      durationMs: ms,
    });
  }
}

/**
 * A step's failure as the composite's: the first step's errors are the request's (it got the
 * client's body) and keep their code; a later step's client errors are the route's doing, 502
 * `sequence_step_failed`. The message names the step either way.
 */
function stepError(n: number, step: SequenceStep, code: ErrorCode, message: string): ModelmuxError {
  const text = `step ${n} (${step.model}): ${message}`;
  if (n > 1 && code !== 'timeout' && ERROR_CATALOGUE[code].status < 500) return new ModelmuxError('sequence_step_failed', `${text} (${code})`);
  return new ModelmuxError(code, text);
}
