import { ModelmuxError, toModelmuxError, type ErrorBody } from '../../common/errors.js';
import { parseRequest } from '../../common/request-grammar.js';
import type { Clock } from '../../common/clock.js';
import { HEADER_REQUEST_ID } from '../../common/names.js';
import type { AccessLog } from '../exchange/access-log.js';
import type { ByteBudget } from '../../common/byte-budget.js';
import type { DownstreamRequest, DownstreamResponse } from '../http1/downstream.js';
import { errorHeaders } from '../http1/error-headers.js';
import type { RouterMetrics } from '../metrics.js';
import type { RequestClass } from './classify.js';
import type { RepositoryAccess } from './repository-access.js';
import type { RequestIds } from '../exchange/request-id.js';
import { indexRequestSchema, indexSchema, type IndexEntry } from '../../common/repository-index.js';
import { mergeIndexes } from './repository-merge.js';
import type { Route } from './route-table.js';
import type { UpstreamController, UpstreamPool } from '../exchange/upstream-pool.js';
import { readBody, type BodyLimits } from '../http1/whole-body.js';

/** A repository call as the dispatcher classified it. */
export type RepositoryCall = Extract<RequestClass, { kind: 'repository' }>;

/** What the fan-out needs of the router (router/exchange/context.ts). */
export interface FanoutContext {
  limits: BodyLimits & { tryTimeoutMs: number };
  buffered: ByteBudget;
  metrics: RouterMetrics;
  access: AccessLog;
  clock: Clock;
  requestIds: RequestIds;
}

/**
 * The entry of the model repository extension: every call of it (`POST …/v2/repository/index`,
 * `…/models/{id}/load`, `…/unload`) is first admitted by the listener's `access`
 * (repository-access.ts) and refused here, logged and counted, if it is not.
 *
 * An index or an unload concerns every replica of a route, not one: they are sent to all of them
 * at once, each with its own timeout (the try timeout), and their answers merged. These requests
 * are rare, so they take this plain promise path rather than the exchange's (an admitted `…/load`
 * is placed by the exchange as a request for the model would be).
 *
 * An unload goes to every replica, not only those whose tables list the model: a replica may
 * be loading it, or have loaded it since its last table. Unloading a model nobody holds, or
 * the store lacks, is a success with no effect, as on a replica: afterwards it is not loaded,
 * which is what was asked.
 *
 * Returns false for an admitted load (the exchange takes it).
 */
export function answerRepository(ctx: FanoutContext, req: DownstreamRequest, res: DownstreamResponse, target: RepositoryCall, access: RepositoryAccess): boolean {
  const { route, call, path, rest } = target;
  const refused = access.refusal(req.rawHeaders);
  if (refused === undefined && call === 'load') return false;
  const started = ctx.clock.now();
  const requestId = ctx.requestIds.next();
  const answered = (status: number, error: string | undefined): void => {
    const ms = ctx.clock.now() - started;
    ctx.metrics.forRoute(route.prefix).answered(status, ms / 1000);
    ctx.access.request({
      requestId,
      method: 'POST',
      path,
      route: route.prefix,
      model: undefined,
      form: undefined,
      replica: undefined,
      placement: undefined,
      waitedMs: undefined,
      tries: undefined,
      error,
      status,
      durationMs: ms,
    });
  };
  const fail = (err: unknown): void => {
    const e = toModelmuxError(err);
    const payload: ErrorBody = { error: e.code, message: e.message, requestId };
    send(res, e.status, requestId, payload, errorHeaders(e.code));
    answered(e.status, e.code);
  };
  try {
    // Refused before its body is read or its model id looked at.
    if (refused !== undefined) throw refused;
    parseRequest('POST', rest, {});
  } catch (err) {
    fail(err);
    return true;
  }
  // Counted in the router's byte budget while it arrives and until the answer is sent, like any body.
  let budgeted = 0;
  const take = (bytes: number): void => {
    if (!ctx.buffered.take(bytes)) throw ctx.buffered.fullError();
    budgeted += bytes;
  };
  readBody(ctx.limits, req, res, take)
    .then((body): Promise<unknown> => (call === 'index' ? index(ctx, route, body) : unload(ctx, route, rest)))
    .then((answer) => {
      send(res, 200, requestId, answer);
      answered(200, undefined);
    }, fail)
    .finally(() => ctx.buffered.release(budgeted));
  return true;
}

async function index(ctx: FanoutContext, route: Route, body: Buffer): Promise<IndexEntry[]> {
  let json: unknown = {};
  if (body.length > 0) {
    try {
      json = JSON.parse(body.toString('utf8'));
    } catch {
      throw new ModelmuxError('invalid_request', 'the body is not valid JSON');
    }
  }
  const r = indexRequestSchema.safeParse(json);
  if (!r.success) throw new ModelmuxError('invalid_request', `not a repository index request: ${r.error.issues[0]?.message ?? 'invalid'}`);
  const answers = await fanOut(ctx, route, '/v2/repository/index', Buffer.from(JSON.stringify(r.data)), (b) => indexSchema.parse(JSON.parse(b.toString('utf8'))));
  return mergeIndexes(
    answers.map((a) => a.value),
    r.data.ready === true,
  );
}

/** `replicas`: those that dropped the model (or never held it): all of the route's. */
async function unload(ctx: FanoutContext, route: Route, path: string): Promise<{ replicas: string[] }> {
  const answers = await fanOut(ctx, route, path, Buffer.from('{}'), () => undefined);
  return { replicas: answers.map((a) => a.replica).sort() };
}

/** Every replica's answer, or `upstream_unavailable` naming those that gave none (or an error). */
async function fanOut<T>(ctx: FanoutContext, route: Route, path: string, body: Buffer, read: (body: Buffer) => T): Promise<{ replica: string; value: T }[]> {
  const replicas = [...route.pools];
  const settled = await Promise.allSettled(
    replicas.map(async ([replica, pool]) => {
      const a = await ask(pool, path, body, ctx.limits.tryTimeoutMs, ctx.limits.maxBodyBytes);
      if (a.status !== 200) throw new Error(`answered ${a.status}: ${a.body.toString('utf8').slice(0, 200)}`);
      return { replica, value: read(a.body) };
    }),
  );
  const failed = settled.flatMap((s, i) => (s.status === 'rejected' ? [`${replicas[i]?.[0] ?? '?'} (${s.reason instanceof Error ? s.reason.message : String(s.reason)})`] : []));
  const ok = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  if (failed.length > 0)
    throw new ModelmuxError('upstream_unavailable', `${failed.length} of ${replicas.length} replicas failed: ${failed.join('; ')}; done on: ${ok.map((a) => a.replica).join(', ') || 'none'}`);
  return ok;
}

/** One POST to one replica through its keep-alive pool, aborted after `timeoutMs`. */
function ask(pool: UpstreamPool, path: string, body: Buffer, timeoutMs: number, maxBytes: number): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    let status = 0;
    let size = 0;
    const chunks: Buffer[] = [];
    let controller: UpstreamController | undefined;
    const timer = setTimeout(() => controller?.abort(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    pool.dispatch(
      { method: 'POST', path, headers: ['content-type', 'application/json'], body },
      {
        onRequestStart: (c) => (controller = c),
        onResponseStart: (_c, s) => (status = s),
        onResponseData: (c, chunk) => {
          size += chunk.length;
          if (size > maxBytes) return c.abort(new Error(`answered more than ${maxBytes} bytes`));
          chunks.push(chunk);
        },
        onResponseEnd: () => {
          clearTimeout(timer);
          resolve({ status, body: Buffer.concat(chunks) });
        },
        onResponseError: (_c, err) => {
          clearTimeout(timer);
          reject(err);
        },
      },
    );
  });
}

function send(res: DownstreamResponse, status: number, requestId: string, body: unknown, extraHeaders: readonly string[] = []): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, ['content-type', 'application/json', HEADER_REQUEST_ID, requestId, ...extraHeaders]).end(JSON.stringify(body));
}
