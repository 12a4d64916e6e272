import { ModelmuxError } from '../../common/errors.js';
import type { DownstreamResponse } from '../http1/downstream.js';
import { MemberRequest } from '../composite/composite-member.js';
import type { RouterContext } from '../exchange/context.js';
import type { RequestSender } from '../exchange/request-sender.js';
import { ModelRouteMetrics, routeOutcome } from './route-metrics.js';
import { DEFAULT_MIRROR_MAX_IN_FLIGHT } from './route-split.js';

/** One copy of a split route's request for its mirror. */
export interface MirrorCopy {
  /** The route's public name, for the metrics. */
  route: string;
  /** The mirror's model. */
  model: string;
  method: string;
  /** Prefix, path and query, the model rewritten to the mirror's. */
  url: string;
  /** The client's raw headers, the model headers rewritten to the mirror's. */
  rawHeaders: string[];
  body: Buffer | null;
  remoteAddress: string | undefined;
}

/**
 * Sends mirror copies through the router (placement, retries, timeouts, the byte budget: the
 * dispatcher's `send`) into a response that only measures and discards. The client's request never
 * waits for a copy or sees its fate: a copy starts after the client's body is in, is dropped
 * when `maxInFlight` copies are under way, and its answer or failure ends here.
 */
export class RouteMirrors {
  private inFlight = 0;
  private readonly metrics: ModelRouteMetrics;

  /** One per router (the dispatcher's): its in-flight count bounds all its copies. */
  constructor(
    private readonly router: Pick<RouterContext, 'limits' | 'clock' | 'metrics' | 'log'>,
    private readonly sendRequest: RequestSender,
  ) {
    this.metrics = ModelRouteMetrics.for(router.metrics);
  }

  /** Copies under way now. */
  get active(): number {
    return this.inFlight;
  }

  send(copy: MirrorCopy): void {
    if (this.inFlight >= (this.router.limits.mirrorMaxInFlight ?? DEFAULT_MIRROR_MAX_IN_FLIGHT)) {
      this.metrics.mirrorEnded(copy.route, copy.model, 'dropped');
      return;
    }
    this.inFlight++;
    const started = this.router.clock.now();
    const res = new DiscardedResponse((status) => {
      this.inFlight--;
      this.metrics.mirrorEnded(copy.route, copy.model, status === undefined ? 'error' : routeOutcome(status), (this.router.clock.now() - started) / 1000);
    });
    const req = new MemberRequest(copy.method, copy.url, copy.rawHeaders, copy.remoteAddress);
    try {
      this.sendRequest(req, res, { mirror: true });
      req.deliver(copy.body);
    } catch (err) {
      // The router answers a copy's own failures; this only keeps a copy's bug away from the client's request.
      res.destroy();
      this.router.log.error('mirror copy failed', { route: copy.route, mirror: copy.model, reason: err instanceof ModelmuxError ? err.code : String(err) });
    }
  }
}

/** Takes an answer and drops its bytes; tells `ended` the status once (undefined: none, or cut off). */
class DiscardedResponse implements DownstreamResponse {
  headersSent = false;
  destroyed = false;
  writableFinished = false;
  private status: number | undefined;
  private ended: ((status: number | undefined) => void) | undefined;
  private readonly closeListeners: (() => void)[] = [];

  constructor(ended: (status: number | undefined) => void) {
    this.ended = ended;
  }

  setHeader(): this {
    return this;
  }

  writeHead(status: number): this {
    this.headersSent = true;
    this.status = status;
    return this;
  }

  write(): boolean {
    return true;
  }

  end(): this {
    if (this.destroyed || this.writableFinished) return this;
    this.writableFinished = true;
    this.settle(this.status);
    return this;
  }

  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    this.settle(undefined);
    return this;
  }

  on(_event: 'close', listener: () => void): this {
    this.closeListeners.push(listener);
    return this;
  }

  private settle(status: number | undefined): void {
    const ended = this.ended;
    this.ended = undefined;
    ended?.(status);
    for (const l of this.closeListeners.splice(0)) l();
  }
}
