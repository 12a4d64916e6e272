import { ERROR_CATALOGUE, ModelmuxError, toModelmuxError, type ErrorBody, type ErrorCode } from '../../common/errors.js';
import { publicName, type EnsembleSpec, type ModelRoute, type SequenceSpec, type SequenceStep } from '../../common/model-route.js';
import { HEADER_REQUEST_ID } from '../../common/names.js';
import { acceptedRequestId } from '../../common/request-id.js';
import type { RequestForm } from '../../common/request-grammar.js';
import { errorOfAnswer, stringify, type ClientForm, type WrittenAnswer } from './composite-body.js';
import type { CompositeAdmission, CompositeLimits } from './composite-admission.js';
import { MemberRequest, sendMember, type AnswerBytes, type CompositeParent, type CompositeScope, type MemberAnswer, type MemberCall } from './composite-member.js';
import { compositeMetadata, parseModelMetadata, type ModelMetadata } from './composite-metadata.js';
import { CompositeMetrics, type MemberOutcome } from './composite-metrics.js';
import type { CodecPort, CompositeWorkers } from './composite-workers.js';
import type { DownstreamRequest, DownstreamResponse } from '../http1/downstream.js';
import { EnsembleTally, type MemberSettlement, type QuorumDecision } from './ensemble-quorum.js';
import { errorHeaders } from '../http1/error-headers.js';
import { MemberSlots } from './member-slots.js';
import type { RouterContext } from '../exchange/context.js';
import type { RequestSender } from '../exchange/request-sender.js';
import { readBody } from '../http1/whole-body.js';
import { rawHeaderValue } from '../routes/route-rewrite.js';
import type { Route } from '../routes/route-table.js';
import type { InputSpec } from './sequence-mapping.js';

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
  /** The request is a gRPC call (router/grpc/grpc-composite.ts): its body a ModelInferRequest, its answer a ModelInferResponse. */
  grpc?: boolean;
}

/**
 * What composites read of the router: its shared parts (exchange/context.ts), their bounds
 * (`--composite-*`), admission and worker threads (one each per router), and the sender their
 * members go out through (the dispatcher's).
 */
export interface CompositeContext extends Pick<RouterContext, 'limits' | 'clock' | 'buffered' | 'metrics' | 'log' | 'access' | 'requestIds'> {
  compositeLimits: CompositeLimits;
  admission: CompositeAdmission;
  workers: CompositeWorkers;
  send: RequestSender;
}

/**
 * Serves a request for an ensemble or a sequence route (ADR 0035): reads its body (V2 JSON, with
 * or without binary data, or a gRPC ModelInferRequest: ADR 0050), sends one JSON request per
 * member or step through the router's own exchange (placed as any request is), and answers in
 * the client's form with the combined (or last) outputs, `parameters.members` and the
 * `x-modelmux-members` header. The tensor work (reading the body and the answers, combining,
 * writing) is the codec's, on a worker thread. A client's request is admitted within the bounds
 * of ADR 0041 (composite requests under way, per client and in all; bytes per client), and its
 * members, at every level of the composites they pass through, within those of that one request
 * (member requests in all and under way). Never throws for the request's own failures: every one
 * is answered with a catalogue error.
 */
export function serveComposite(ctx: CompositeContext, req: DownstreamRequest, res: DownstreamResponse, target: CompositeTarget): void {
  new CompositeRequest(ctx, req, res, target, req instanceof MemberRequest ? req.composite : undefined).start();
}

class CompositeRequest {
  private readonly started: number;
  private readonly requestId: string;
  private readonly name: string;
  private readonly metrics: CompositeMetrics;
  private finished = false;
  /** The client request's bounds: its own, or those of the composite that sent this one. */
  private scope: CompositeScope | undefined;
  /** Bytes this composite holds (its body, its members' answers), in the byte budget and its client's share. */
  private held = 0;
  /** Where its tensor work runs (a worker thread), under a key of its own. */
  private readonly codec: CodecPort;
  /** The codec holds its request: to be dropped when it ends. */
  private coded = false;
  private timer: NodeJS.Timeout | undefined;
  /** Cancels of the member requests not answered yet. */
  private readonly running = new Set<() => void>();
  /** What was under way, for the deadline's message. */
  private stepRunning = 'its body was read';
  /** Members running when the composite ends, with the outcome they are counted as. */
  private onEnd: ((outcome: MemberOutcome) => void) | undefined;

  constructor(
    private readonly ctx: CompositeContext,
    private readonly req: DownstreamRequest,
    private readonly res: DownstreamResponse,
    private readonly target: CompositeTarget,
    /** Set when this composite is a member of another: it is part of that client request. */
    private readonly parent: CompositeParent | undefined,
  ) {
    this.started = ctx.clock.now();
    this.requestId = acceptedRequestId(rawHeaderValue(req.rawHeaders, HEADER_REQUEST_ID)) ?? ctx.requestIds.next();
    this.name = publicName(target.modelRoute);
    this.metrics = CompositeMetrics.for(ctx.metrics);
    this.codec = ctx.workers.port();
  }

  start(): void {
    this.res.on('close', this.onClientClose);
    if (this.parent !== undefined) {
      this.scope = this.parent.scope;
      this.parent.releaseSlot();
    } else if (!this.admit()) return;
    const method = this.req.method ?? 'GET';
    if (method === 'GET' || method === 'HEAD') {
      const path = this.req.url ?? '/';
      void this.describe(/\/ready(\?|$)/.test(path)).catch((err: unknown) => this.fail(err));
      return;
    }
    // A member request of another composite brings its body: it is neither read nor counted again.
    const given = this.parent?.body ?? null;
    if (given !== null) return this.read(given);
    const { limits, buffered } = this.ctx;
    const limit = Math.min(limits.maxBodyBytes, this.ctx.compositeLimits.maxBodyBytes);
    const declared = Number(rawHeaderValue(this.req.rawHeaders, 'content-length') ?? '0');
    if (declared > limit) return this.fail(bodyTooLarge(declared, limit));
    if (declared > buffered.available) return this.fail(buffered.fullError());
    const take = (bytes: number): void => {
      const refused = this.hold(bytes);
      if (refused !== undefined) throw refused;
    };
    readBody({ ...limits, maxBodyBytes: limit }, this.req, this.res, take).then(
      (body) => {
        if (!this.finished) this.read(body);
      },
      (err: unknown) => this.fail(err),
    );
  }

  /**
   * Takes the client's request under the router's composite bounds, with bounds of its own for
   * its members; false (and answered) when a bound refuses it.
   */
  private admit(): boolean {
    const ticket = this.ctx.admission.admit(this.req.socket.remoteAddress ?? '');
    if (ticket instanceof ModelmuxError) {
      this.fail(ticket);
      return false;
    }
    const { maxMemberRequests, maxMembersInFlight } = this.ctx.compositeLimits;
    this.scope = { slots: new MemberSlots(maxMemberRequests, maxMembersInFlight), ticket, fail: (err) => this.fail(err), ended: () => this.finished };
    return true;
  }

  /**
   * Has the codec read and check the body (the deadline already running), then runs the
   * ensemble or the sequence.
   */
  private read(body: Buffer): void {
    const { ensemble, sequence } = this.target.modelRoute.spec;
    const requestTimeoutMs = this.ctx.limits.requestTimeoutMs;
    const deadlineMs = Math.min(requestTimeoutMs, ensemble?.deadlineMs ?? Number.POSITIVE_INFINITY);
    this.timer = setTimeout(() => this.expire(deadlineMs < requestTimeoutMs ? `the ensemble deadline of ${deadlineMs} ms passed` : `the request deadline of ${deadlineMs} ms passed`), deadlineMs);
    this.coded = true;
    const form: ClientForm = this.target.grpc === true ? { kind: 'grpc' } : { kind: 'http', inferenceHeaderLength: rawHeaderValue(this.req.rawHeaders, 'inference-header-content-length') };
    this.codec.call('request', body, form, sequence !== undefined).then(
      (memberBody) => {
        if (this.finished) return;
        // Members are sent JSON: the client's body when it is that already, else the codec's.
        const sent = memberBody === undefined ? body : bytesOf(memberBody);
        if (ensemble !== undefined) this.ensemble(ensemble, sent);
        else if (sequence !== undefined) void this.sequence(sequence, sent).catch((err: unknown) => this.fail(err));
        else this.fail(new ModelmuxError('internal', `route ${this.name} is neither an ensemble nor a sequence`));
      },
      (err: unknown) => this.fail(err),
    );
  }

  // --- ensembles --------------------------------------------------------------------------------

  /** Each member is sent the client's body; their answers are read as they come (member i's in slot i), and combined once the tally decides. */
  private ensemble(spec: EnsembleSpec, body: Buffer): void {
    const names = spec.members.map((m) => m.model);
    const tally = new EnsembleTally(names, spec.combine, spec.quorum);
    let decided = false;
    const decide = (d: QuorumDecision, pendingAs: MemberOutcome): void => {
      if (d.kind === 'wait' || this.finished || decided) return;
      decided = true;
      this.onEnd = undefined;
      for (const i of tally.pending) this.counted(names[i] as string, pendingAs, undefined);
      if (d.kind === 'fail') return this.fail(d.error);
      // The members still running are not needed: cancelled while the answers are combined.
      for (const stop of [...this.running]) stop();
      const members = d.members.map((i) => names[i] as string);
      this.codec.call('combine', d.members, members, spec.combine, spec.outputs, this.name).then(
        (answer) => this.answer(answer, members),
        (err: unknown) => this.fail(err),
      );
    };
    this.expire = (why) => decide(tally.expire(why), 'deadline');
    this.onEnd = (outcome) => {
      for (const i of tally.pending) this.counted(names[i] as string, outcome, undefined);
    };
    names.forEach((model, i) => {
      if (this.finished) return;
      let sent = 0;
      void this.send(model, 'infer', body, (at) => (sent = at)).then(async (a) => {
        if (this.finished) return;
        const seconds = (this.ctx.clock.now() - sent) / 1000;
        const r = await this.result(a, 'ensemble_mismatch', i);
        if (this.finished || decided) return;
        this.counted(model, r.ok ? 'ok' : 'failed', seconds);
        decide(tally.settle(i, r), 'cancelled');
      });
    });
  }

  // --- sequences --------------------------------------------------------------------------------

  /**
   * Runs the steps in order, step n's answer read into slot n, from which the codec writes step
   * n + 1's request (by that step's metadata) and, for the last, the answer. `firstBody`: the
   * client's body, without the `outputs` it names (those of the last step).
   */
  private async sequence(spec: SequenceSpec, firstBody: Buffer): Promise<void> {
    const steps = spec.steps;
    const members = steps.map((s) => s.model);
    const firstStep = this.step(1, steps[0] as SequenceStep, firstBody);
    // Every later step's inputs come from its metadata, asked at once, after the first step (it
    // goes first when members wait for a place): this also loads each step's model while the
    // steps before it run.
    const metadata = steps.slice(1).map((s) => this.send(s.model, 'metadata', null));
    if (!(await firstStep)) return;
    for (let n = 2; n <= steps.length; n++) {
      const step = steps[n - 1] as SequenceStep;
      this.stepRunning = `step ${n} (${step.model}) ran`;
      const meta = await metadata[n - 2];
      if (this.finished || meta === undefined) return;
      const inputs = this.metadataOf(n, step, meta);
      const body = await this.codec.call('step', n - 1, n, step, inputs, (steps[n - 2] as SequenceStep).model, n === steps.length);
      if (this.finished || !(await this.step(n, step, bytesOf(body)))) return;
    }
    const answer = await this.codec.call('last', steps.length, members, this.name);
    if (!this.finished) this.answer(answer, members);
  }

  /** Runs step `n`, its answer read into slot n; false when the composite ended meanwhile. */
  private async step(n: number, step: SequenceStep, body: Buffer): Promise<boolean> {
    let sent = 0;
    this.stepRunning = `step ${n} (${step.model}) ran`;
    this.onEnd = (outcome) => this.counted(step.model, outcome, undefined);
    const a = await this.send(step.model, 'infer', body, (at) => (sent = at));
    if (this.finished) return false;
    const seconds = (this.ctx.clock.now() - sent) / 1000;
    const r = await this.result(a, 'sequence_step_failed', n);
    if (this.finished) return false;
    this.onEnd = undefined;
    this.counted(step.model, r.ok ? 'ok' : 'failed', seconds);
    if (r.ok) return true;
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

  /**
   * One member request, sent once the client request's bounds give it a place; never settles
   * once cancelled (the composite then has ended), nor when a bound of the whole request bites
   * (that ends the client's request). From then until it ends its body counts in its client's
   * share of bytes (the exchange counts it in the byte budget). `started` is told when it is sent.
   */
  private send(model: string, action: MemberCall['action'], body: Buffer | null, started?: (at: number) => void): Promise<MemberAnswer> {
    return new Promise((resolve) => {
      const scope = this.scope as CompositeScope;
      let counted = 0;
      let ended = false;
      let endPlace: (() => void) | undefined;
      let cancelExchange: (() => void) | undefined;
      const end = (): void => {
        if (ended) return;
        ended = true;
        this.running.delete(stop);
        scope.ticket.release(counted);
        endPlace?.();
      };
      const stop = (): void => {
        end();
        cancelExchange?.();
      };
      const start = (endSlot: () => void): void => {
        endPlace = endSlot;
        // The place came as the client's request was ending: its members are being cancelled.
        if (this.finished || scope.ended()) return end();
        const refused = scope.ticket.take(body?.length ?? 0);
        if (refused !== undefined) {
          end();
          return scope.fail(refused);
        }
        counted = body?.length ?? 0;
        started?.(this.ctx.clock.now());
        const call: MemberCall = {
          prefix: this.target.route.prefix,
          model,
          action,
          body,
          requestId: this.requestId,
          clientHeaders: this.req.rawHeaders,
          remoteAddress: this.req.socket.remoteAddress,
          parent: { scope, releaseSlot: endSlot },
          answerBytes: this.answerBytes,
        };
        cancelExchange = sendMember(this.ctx.send, this.ctx.limits.maxResponseBufferBytes, call, (a) => {
          end();
          resolve(a);
        });
      };
      this.running.add(stop);
      try {
        endPlace = scope.slots.add(start);
        if (ended) endPlace();
      } catch (err) {
        end();
        scope.fail(toModelmuxError(err));
      }
    });
  }

  /** Takes `n` bytes into the byte budget and the client's share, or says which refuses them. */
  private hold(n: number): ModelmuxError | undefined {
    const ticket = (this.scope as CompositeScope).ticket;
    const refused = ticket.take(n);
    if (refused !== undefined) return refused;
    if (!this.ctx.buffered.take(n)) {
      ticket.release(n);
      return this.ctx.buffered.fullError();
    }
    this.held += n;
    return undefined;
  }

  private unhold(n: number): void {
    const m = Math.min(n, this.held);
    this.held -= m;
    this.scope?.ticket.release(m);
    this.ctx.buffered.release(m);
  }

  /**
   * Members' answers are held by this composite until it ends (its codec keeps them parsed). An
   * answer that does not fit ends the client's request with why, rather than failing one member.
   */
  private readonly answerBytes: AnswerBytes = {
    take: (n) => {
      const refused = this.hold(n);
      if (refused !== undefined) this.scope?.fail(refused);
      return refused;
    },
    release: (n) => this.unhold(n),
  };

  /** How a member's answer settles it: a 200 answer is read into `slot`; one that is no V2 answer is `invalid`. */
  private async result(a: MemberAnswer, invalid: ErrorCode, slot: number): Promise<MemberSettlement> {
    if (!a.ok) return { ok: false, code: a.error.code, message: a.error.message };
    if (a.status !== 200) return { ok: false, ...errorOfAnswer(a.status, a.body) };
    try {
      await this.codec.call('answer', slot, a.body);
      return { ok: true };
    } catch (err) {
      if (err instanceof ModelmuxError) return { ok: false, code: err.code, message: err.message };
      return { ok: false, code: invalid, message: err instanceof Error ? err.message : String(err) };
    }
  }

  private counted(member: string, outcome: MemberOutcome, seconds: number | undefined): void {
    this.metrics.member(this.target.route.prefix, this.name, member, outcome, seconds);
  }

  // --- endings ----------------------------------------------------------------------------------

  /** The deadline passed: an ensemble answers with what it has if it may (replaced by `ensemble`). */
  private expire = (why: string): void => {
    this.fail(new ModelmuxError('timeout', `${why} while ${this.stepRunning}`), 'deadline');
  };

  /** The answer the codec wrote. */
  private answer(written: WrittenAnswer, members: string[]): void {
    if (this.finished) return;
    const bytes = bytesOf(written.bytes);
    if (!this.res.headersSent && !this.res.destroyed) {
      const headers = ['content-type', written.contentType, 'content-length', String(bytes.length), HEADER_REQUEST_ID, this.requestId, HEADER_MEMBERS, members.join(',')];
      if (written.headerLength !== undefined) headers.push('inference-header-content-length', String(written.headerLength));
      this.res.writeHead(200, headers);
      this.res.write(bytes);
      this.res.end();
    }
    this.finish(200, undefined, 'cancelled');
  }

  private respond(status: number, body: unknown): void {
    if (this.finished) return;
    if (!this.res.headersSent && !this.res.destroyed) {
      this.res.writeHead(status, ['content-type', 'application/json', HEADER_REQUEST_ID, this.requestId]).end(stringify(body));
    }
    this.finish(status, undefined, 'cancelled');
  }

  private readonly onClientClose = (): void => {
    if (this.finished || this.res.writableFinished) return;
    this.fail(new ModelmuxError('client_closed', 'the client closed the connection before the answer'));
  };

  private fail(err: unknown, runningAs: MemberOutcome = 'cancelled'): void {
    if (this.finished) return;
    const e = toModelmuxError(err);
    if (e.code === 'internal') this.ctx.log.error('composite request failed', { requestId: this.requestId, route: this.name, reason: e.message });
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
    for (const stop of [...this.running]) stop();
    this.running.clear();
    this.unhold(this.held);
    if (this.parent === undefined) this.scope?.ticket.end();
    if (this.coded) void this.codec.call('drop').catch(() => undefined);
    const ms = this.ctx.clock.now() - this.started;
    const prefix = this.target.route.prefix;
    this.ctx.metrics.forRoute(prefix).answered(status, ms / 1000);
    const url = this.req.url ?? '/';
    const q = url.indexOf('?');
    this.ctx.access.request({
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

/** The codec's bytes as a Buffer, without a copy. */
function bytesOf(bytes: Uint8Array | undefined): Buffer {
  if (bytes === undefined) throw new ModelmuxError('internal', 'the composite codec wrote nothing');
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function bodyTooLarge(declared: number, limit: number): ModelmuxError {
  return new ModelmuxError(
    'body_too_large',
    `the body is ${declared} bytes; an ensemble or sequence takes at most ${limit} (--composite-max-body-bytes, at most --max-body-bytes): each member is sent it and the router parses it`,
  );
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
