import { systemClock, systemRandom } from '../common/clock.js';
import { createLogger, stdoutSink } from '../common/log.js';
import { AccessLog } from './exchange/access-log.js';
import { AdminServer } from './http1/admin-server.js';
import { systemSetTimer } from './placement/balancer.js';
import { parseRouterConfig } from './config.js';
import type { Discovery } from './discovery/discovery.js';
import { grpcSessionLimits } from './grpc/grpc-options.js';
import { RouterGrpcServer } from './grpc/grpc-server.js';
import { GrpcSessions } from './grpc/grpc-sessions.js';
import { KubeDiscovery } from './discovery/kube-discovery.js';
import { KubeRoutes } from './discovery/kube-model-routes.js';
import { RouterMetrics } from './metrics.js';
import { RequestDispatcher } from './exchange/dispatch.js';
import { publicRepositoryAccess } from './routes/repository-access.js';
import { readRoutesFile } from './routes/route-file.js';
import { RouteTable } from './routes/route-table.js';
import { RouterServer } from './http1/server.js';
import { StaticDiscovery } from './discovery/static-discovery.js';

/** `modelmux router`: wiring only. Resolves once listening; SIGTERM/SIGINT drain and exit. */
export async function run(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const config = parseRouterConfig(argv, env);
  const log = createLogger({ component: 'router' }, stdoutSink, config.logLevel);
  const metrics = new RouterMetrics();
  // Access lines share stdout's batches with the other log lines (common/log.ts).
  const access = new AccessLog({ component: 'router' }, stdoutSink, config.logLevel);
  const routes = new RouteTable(
    {
      recentMs: config.recentMs,
      tableLagMs: config.pollIntervalMs * 2 + 1000,
      maxQueue: config.maxQueue,
      zeroHoldMs: config.zeroHoldMs,
      zeroHoldMax: config.zeroHoldMax,
      connectionsPerReplica: config.connectionsPerReplica,
      outliers: {
        consecutiveFailures: config.outlierConsecutiveFailures,
        ejectionMs: config.outlierEjectionMs,
        maxEjectionMs: config.outlierMaxEjectionMs,
        maxEjectedPercent: config.outlierMaxEjectedPercent,
      },
      retryBudgetPercent: config.retryBudgetPercent,
    },
    systemClock,
    systemRandom,
    systemSetTimer,
    log,
  );
  const dispatcher = new RequestDispatcher(
    routes,
    {
      maxBodyBytes: config.maxBodyBytes,
      requestTimeoutMs: config.requestTimeoutMs,
      tryTimeoutMs: config.tryTimeoutMs,
      tryTimeoutFloorMs: config.tryTimeoutFloorMs,
      tryTimeoutMultiple: config.tryTimeoutMultiple,
      maxRetries: config.maxRetries,
      bodyIdleTimeoutMs: config.bodyIdleTimeoutMs,
      bodyTimeoutMs: config.bodyTimeoutMs,
      maxBufferedBytes: config.maxBufferedBytes,
      maxResponseBufferBytes: config.maxResponseBufferBytes,
      bodyCutThrough: config.bodyCutThrough,
      bodyCutThroughHoldMs: config.bodyCutThroughHoldMs,
      slowReaderTimeoutMs: config.slowReaderTimeoutMs,
      mirrorMaxInFlight: config.mirrorMaxInFlight,
      composite: {
        maxBodyBytes: config.compositeMaxBodyBytes,
        maxMemberRequests: config.compositeMaxMemberRequests,
        maxMembersInFlight: config.compositeMaxMembersInFlight,
        maxInFlight: config.compositeMaxInFlight,
        maxInFlightPerClient: config.compositeMaxInFlightPerClient,
        maxBytesPerClient: config.compositeMaxBytesPerClient,
        workers: config.compositeWorkers,
      },
    },
    metrics,
    log,
    systemClock,
    access,
  );
  const server = new RouterServer(dispatcher, publicRepositoryAccess(config.repositoryApiToken, config.adminPort), routes, metrics, log, config);
  const admin = config.adminPort === -1 ? undefined : new AdminServer(server, dispatcher, metrics, log, config);
  const upstreams = new GrpcSessions(grpcSessionLimits());
  let ready = false;
  const grpc =
    config.grpcPort === -1
      ? undefined
      : new RouterGrpcServer(
          { router: dispatcher.context, composites: dispatcher.composites, upstreams, maxResponseBytes: config.grpcMaxResponseBytes, upstream: config.grpcUpstream },
          config,
          () => ready,
          log,
        );
  const discovery: Discovery =
    config.discovery === 'kube'
      ? new KubeDiscovery(config.namespace, log)
      : new StaticDiscovery(config.staticRoutes, { maxOngoingRequests: config.maxOngoingRequests, matchTimeoutMs: config.matchTimeoutSeconds * 1000 }, config.pollIntervalMs, log);

  // A routes file is configuration: a bad one stops the start, with every problem it has.
  if (config.routesFile !== undefined) routes.applyModelRoutes(readRoutesFile(config.routesFile, 'router', '--routes-file'));
  const kubeRoutes = config.discovery === 'kube' ? new KubeRoutes(config.namespace, log) : undefined;
  kubeRoutes?.start((byPool) => routes.applyModelRoutes(byPool));

  const address = await server.listen(config.port, config.host);
  const grpcPort = grpc === undefined ? undefined : await grpc.listen(config.grpcPort, config.host);
  const adminAddress = await admin?.listen(config.adminPort, config.adminHost ?? config.host);
  await discovery.start((states) => {
    routes.apply(states);
    upstreams.apply(states);
  });
  server.markDiscoveryReady();
  ready = true;
  log.info('router listening', {
    host: address.address,
    port: address.port,
    grpcPort,
    adminHost: adminAddress?.address,
    adminPort: adminAddress?.port,
    repositoryApiOnPublicPort: config.repositoryApiToken !== undefined,
    discovery: config.discovery,
    routes: routes.all().map((r) => r.prefix),
  });

  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    ready = false;
    log.info('draining', { signal });
    discovery.stop();
    kubeRoutes?.stop();
    void Promise.all([server.drain(config.shutdownGraceMs), grpc?.drain(config.shutdownGraceMs), admin?.drain(config.shutdownGraceMs)])
      .then(() => {
        upstreams.close();
        return routes.close();
      })
      .finally(() => {
        log.info('stopped');
        process.exit(0);
      });
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}
