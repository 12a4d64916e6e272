import type { Clock } from '../../common/clock.js';
import type { Logger } from '../../common/log.js';
import { AccessLog } from './access-log.js';
import { systemSetTimer } from '../placement/balancer.js';
import { ByteBudget } from '../../common/byte-budget.js';
import type { CompositeLimits } from '../composite/composite-admission.js';
import { Deadlines, deadlineResolutionMs } from './deadlines.js';
import type { DownstreamRequest, DownstreamResponse } from '../http1/downstream.js';
import { Exchange } from './exchange.js';
import type { RouterMetrics } from '../metrics.js';
import type { RepositoryAccess } from '../routes/repository-access.js';
import { answerRepositoryFanout } from '../routes/repository-fanout.js';
import { RequestIds } from './request-id.js';
import type { RouteTable } from '../routes/route-table.js';
import type { TryTimeoutPolicy } from './try-timeout.js';

export interface ProxyLimits {
  maxBodyBytes: number;
  /** The request once its body is in: waiting for a slot, the tries and the answer. */
  requestTimeoutMs: number;
  /**
   * One try at one replica, up to its response headers: the cap of the adaptive try timeout,
   * and the timeout of a try that may not be retried (ADR 0030).
   */
  tryTimeoutMs: number;
  /** The adaptive try timeout: `tryTimeoutMultiple` × the recent p99, at least `tryTimeoutFloorMs` (try-timeout.ts). */
  tryTimeoutFloorMs: number;
  tryTimeoutMultiple: number;
  /** Tries of one request on other replicas after its first. */
  maxRetries: number;
  /** The body: no byte for this long, or not all of it this long after the head: 408. */
  bodyIdleTimeoutMs: number;
  bodyTimeoutMs: number;
  /** Request bodies and slow readers' answers held at once, across all requests (bytes). */
  maxBufferedBytes: number;
  /** Of one answer, held for a client that reads it slowly so its replica is freed (bytes). */
  maxResponseBufferBytes: number;
  /** How long a slow client may keep a replica's answer paused once that is full (ADR 0026). */
  slowReaderTimeoutMs: number;
  /** Mirror copies of split-route requests under way at once; past it copies are dropped (route-mirror.ts). */
  mirrorMaxInFlight?: number;
  /** The bounds of ensemble and sequence requests (composite-admission.ts); its defaults when absent. */
  composite?: CompositeLimits;
}

/**
 * Forwards requests: route by prefix, model id from the request form, a replica from the
 * route's balancer, the body (buffered up to the limit, so a retry can resend it) to that
 * replica with the prefix stripped, the response streamed back. Up to `maxRetries` retries on
 * other replicas, within the route's retry budget, when a try fails before its answer starts
 * (ADR 0030). Each request is one
 * `Exchange` (exchange.ts), a callback state machine: the hot path allocates no promise,
 * stream pipeline, AbortSignal or timer (ADR 0014).
 */
export class RouterProxy {
  /** Ids for requests that come without a valid `x-request-id`. */
  readonly requestIds = new RequestIds();
  /** The bytes held for all requests at once. */
  readonly buffered: ByteBudget;
  readonly tryTimeouts: TryTimeoutPolicy;

  constructor(
    readonly routes: RouteTable,
    readonly limits: ProxyLimits,
    readonly metrics: RouterMetrics,
    readonly log: Logger,
    readonly clock: Clock,
    readonly access: AccessLog = new AccessLog({ component: 'router' }),
    readonly deadlines: Deadlines = new Deadlines(
      clock,
      systemSetTimer,
      deadlineResolutionMs(Math.min(limits.requestTimeoutMs, limits.tryTimeoutMs, limits.tryTimeoutFloorMs, limits.bodyIdleTimeoutMs, limits.bodyTimeoutMs, limits.slowReaderTimeoutMs)),
    ),
  ) {
    this.buffered = new ByteBudget(limits.maxBufferedBytes);
    this.tryTimeouts = { floorMs: limits.tryTimeoutFloorMs, multiple: limits.tryTimeoutMultiple, capMs: limits.tryTimeoutMs };
  }

  /**
   * Answers `req` on `res`; never throws for a request's own failures (they are answered).
   * `repository` says who may call the model repository API on the listener it came to.
   */
  handle(req: DownstreamRequest, res: DownstreamResponse, repository: RepositoryAccess): void {
    if (answerRepositoryFanout(this, req, res, repository)) return;
    new Exchange(this, req, res).start();
  }
}
