import type { Clock } from '../../common/clock.js';
import type { ModelmuxError } from '../../common/errors.js';
import { BODY_POOL_BUFFERS, BODY_POOL_BYTES, BufferPool } from '../../common/buffer-pool.js';
import { ByteBudget } from '../../common/byte-budget.js';
import type { Logger } from '../../common/log.js';
import { MODEL_HEADERS } from '../../common/request-grammar.js';
import { CompositeAdmission, DEFAULT_COMPOSITE_LIMITS } from '../composite/composite-admission.js';
import { serveComposite, type CompositeContext } from '../composite/composite-route.js';
import { CompositeWorkers } from '../composite/composite-workers.js';
import type { DownstreamRequest, DownstreamResponse } from '../http1/downstream.js';
import { scanRequestHeaders } from '../http1/hop-headers.js';
import { systemSetTimer } from '../placement/balancer.js';
import type { RouterMetrics } from '../metrics.js';
import { classifyForm, classifyRequest } from '../routes/classify.js';
import { REPOSITORY_OPEN, type RepositoryAccess } from '../routes/repository-access.js';
import { answerRepository } from '../routes/repository-fanout.js';
import { RouteMirrors } from '../routes/route-mirror.js';
import { runtimeInvocation } from '../sagemaker/runtime-exchange.js';
import type { RouteTable } from '../routes/route-table.js';
import { AccessLog } from './access-log.js';
import type { ProxyLimits, RouterContext } from './context.js';
import { Deadlines, deadlineResolutionMs } from './deadlines.js';
import { Exchange } from './exchange.js';
import { RequestIds } from './request-id.js';
import type { RequestSender, SendOptions } from './request-sender.js';

/**
 * The router's one entry for requests: each is classified once (routes/classify.ts: a plain
 * request, a split route's, a composite's, a repository call, or one refused) and handed to what
 * serves its kind — an `Exchange` (placement, tries, retries, the answer streamed back: ADR 0014,
 * ADR 0030), a composite (ADR 0035, ADR 0041), or the repository fan-out (ADR 0040). Composites
 * and mirrors send their own requests back through here (`send`), so nothing but this file knows
 * every kind, and no kind builds another.
 */
export class RequestDispatcher {
  readonly context: RouterContext;
  /** What composites share: the gRPC port's calls to them are served with it too. */
  readonly composites: CompositeContext;
  private readonly mirrors: RouteMirrors;

  constructor(
    routes: RouteTable,
    limits: ProxyLimits,
    metrics: RouterMetrics,
    log: Logger,
    clock: Clock,
    access: AccessLog = new AccessLog({ component: 'router' }),
    deadlines: Deadlines = new Deadlines(
      clock,
      systemSetTimer,
      deadlineResolutionMs(Math.min(limits.requestTimeoutMs, limits.tryTimeoutMs, limits.tryTimeoutFloorMs, limits.bodyIdleTimeoutMs, limits.bodyTimeoutMs, limits.slowReaderTimeoutMs)),
    ),
  ) {
    this.context = {
      routes,
      limits,
      metrics,
      log,
      clock,
      access,
      deadlines,
      buffered: new ByteBudget(limits.maxBufferedBytes),
      bodies: new BufferPool(BODY_POOL_BUFFERS, BODY_POOL_BYTES),
      requestIds: new RequestIds(),
      tryTimeouts: { floorMs: limits.tryTimeoutFloorMs, multiple: limits.tryTimeoutMultiple, capMs: limits.tryTimeoutMs },
    };
    const compositeLimits = limits.composite ?? DEFAULT_COMPOSITE_LIMITS;
    this.composites = {
      ...this.context,
      compositeLimits,
      admission: new CompositeAdmission(compositeLimits),
      workers: new CompositeWorkers(compositeLimits.workers, log),
      send: this.send,
    };
    this.mirrors = new RouteMirrors(this.context, this.send);
  }

  /** Answers a client's request from a listener; `repository` says who may call the model repository API there. Never throws for a request's own failures. */
  handle(req: DownstreamRequest, res: DownstreamResponse, repository: RepositoryAccess): void {
    // The SageMaker runtime API (router/sagemaker/): served as its pool's POST /invocations, answered in its shape.
    const runtime = runtimeInvocation(req, res);
    if (runtime === undefined) this.serve(req, res, repository, {});
    else this.serve(runtime.req, runtime.res, repository, {}, runtime.refusal);
  }

  /** A request from inside the router (a composite's member, a mirror copy), served as a client's. */
  readonly send: RequestSender = (req, res, options = {}) => this.serve(req, res, REPOSITORY_OPEN, options);

  private serve(req: DownstreamRequest, res: DownstreamResponse, repository: RepositoryAccess, options: SendOptions, refusal?: ModelmuxError): void {
    const method = req.method ?? 'GET';
    const scanned = scanRequestHeaders(req.rawHeaders, MODEL_HEADERS);
    let c = classifyRequest(method, req.url ?? '/', scanned.modelHeaders, req.rawHeaders, this.context.routes, options);
    if (refusal !== undefined) c = { kind: 'refused', path: c.path, prefix: c.prefix, rest: c.rest, query: c.query, route: c.route, error: refusal };
    if (c.kind === 'composite') return serveComposite(this.composites, req, res, c);
    if (c.kind === 'repository') {
      if (answerRepository(this.context, req, res, c, repository)) return;
      // An admitted load is placed as a request for its model would be.
      c = classifyForm(method, c, c.route, scanned.modelHeaders, req.rawHeaders, options);
    }
    new Exchange(this.context, req, res, c, scanned, this.mirrors, options).start();
  }
}
