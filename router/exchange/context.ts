import type { BufferPool } from '../../common/buffer-pool.js';
import type { ByteBudget } from '../../common/byte-budget.js';
import type { Clock } from '../../common/clock.js';
import type { Logger } from '../../common/log.js';
import type { CompositeLimits } from '../composite/composite-admission.js';
import type { RouterMetrics } from '../metrics.js';
import type { RouteTable } from '../routes/route-table.js';
import type { AccessLog } from './access-log.js';
import type { Deadlines } from './deadlines.js';
import type { RequestIds } from './request-id.js';
import type { TryTimeoutPolicy } from './try-timeout.js';

/**
 * How long a body cut through to its replica may hold the replica's slot while it comes: long
 * enough for a few MiB over a slow client link, short next to the body timeouts a stalled upload
 * would otherwise hold it for (docs/adr/0051, "Router cut-through").
 */
export const DEFAULT_CUT_THROUGH_HOLD_MS = 2000;

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
  /** Large bodies go to their replica as they arrive (ADR 0051, "Router cut-through"); on when absent. */
  bodyCutThrough?: boolean;
  /** How long a cut-through body may hold its replica's slot before it is taken back (`DEFAULT_CUT_THROUGH_HOLD_MS` when absent). */
  bodyCutThroughHoldMs?: number;
  /** Mirror copies of split-route requests under way at once; past it copies are dropped (route-mirror.ts). */
  mirrorMaxInFlight?: number;
  /** The bounds of ensemble and sequence requests (composite-admission.ts); its defaults when absent. */
  composite?: CompositeLimits;
}

/**
 * What the requests of one router share, as data: the route table, the limits, the byte budget,
 * the deadline sweep, ids, metrics and logs. A plain interface, built once by the dispatcher
 * (dispatch.ts): an exchange, a gRPC call, the fan-out and the composites each read the part
 * they need (their own narrower types pick it), and none of them can reach the dispatcher.
 */
export interface RouterContext {
  readonly routes: RouteTable;
  readonly limits: ProxyLimits;
  readonly metrics: RouterMetrics;
  readonly log: Logger;
  readonly clock: Clock;
  readonly access: AccessLog;
  /** The deadlines of every request in flight, one sweep (ADR 0014). */
  readonly deadlines: Deadlines;
  /** The bytes held for all requests at once, HTTP and gRPC (ADR 0026, ADR 0039). */
  readonly buffered: ByteBudget;
  /** Buffers of large request bodies, reused from request to request (body-buffer.ts). */
  readonly bodies: BufferPool;
  /** Ids for requests that come without a valid `x-request-id`. */
  readonly requestIds: RequestIds;
  readonly tryTimeouts: TryTimeoutPolicy;
}
