import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { createLogger, stdoutSink } from '../common/log.js';
import { apiClients, type ApiCaller, type ApiClients } from './api-clients.js';
import { OperatorCaches } from './caches.js';
import { parseOperatorConfig } from './config.js';
import { Controller } from './controller.js';
import { deploymentController } from './deployment-controller.js';
import { EventRecorder } from './events.js';
import { KubeWriter } from './kube-writer.js';
import { LeaderElector } from './leader-election.js';
import { createOperatorMetrics } from './metrics.js';
import { routeController } from './route-controller.js';

/** `modelmux operator`: wiring only. */
export async function run(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const config = parseOperatorConfig(argv, env);
  const log = createLogger({ component: 'operator', identity: config.identity }, stdoutSink, config.logLevel);
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const metrics = createOperatorMetrics();
  // One set of clients per caller, so the request metric says who asked.
  const clientsFor = (caller: ApiCaller): ApiClients => apiClients(kc, (verb) => metrics.apiRequests.inc({ caller, verb }));
  const reconcileClients = clientsFor('reconcile');
  const informerClients = clientsFor('informer');
  let leading = false;

  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/metrics') {
      metrics.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
    } else if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    } else if (path === '/readyz') {
      // A standby is ready too (as in controller-runtime): readiness gating on leadership would
      // stall a rolling update of a two-instance operator. Who leads is in the body and the metric.
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ leader: leading }));
    } else {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not_found","message":"No such path."}');
    }
  });
  await new Promise<void>((resolve) => server.listen(config.metricsPort, config.metricsHost, resolve));
  const addr = server.address() as AddressInfo;
  log.info('operator metrics listening', { url: `http://${addr.address}:${addr.port}` });

  const writer = new KubeWriter(reconcileClients);
  const events = new EventRecorder(writer, log);
  const now = (): Date => new Date();
  // One shared cache, started now, on a standby too: a new leader acts on warm caches, and only
  // the controllers' workers wait for the Lease (controller-runtime's manager).
  const caches = new OperatorCaches(kc, informerClients.objects, config.namespace, {
    log,
    onWatch: () => metrics.apiRequests.inc({ caller: 'informer', verb: 'watch' }),
    onRestart: (resource) => metrics.watchRestarts.inc({ resource }),
  });
  const controllerOptions = { workers: config.workers, resyncMs: config.resyncSeconds * 1000 };
  const controllers = [
    new Controller(
      deploymentController({
        cache: caches,
        synced: () => caches.synced(['resources', 'deployments', 'owned', 'pods']),
        writer,
        events,
        options: { defaultImage: config.replicaImage },
        log,
        now,
      }),
      metrics,
      log,
      controllerOptions,
    ),
    new Controller(routeController({ cache: caches, synced: () => caches.synced(['resources']), writer, now }), metrics, log, controllerOptions),
  ];
  caches.onChange((group, type, obj) => {
    for (const c of controllers) c.observe(group, type, obj);
  });
  caches.start();
  const elector = config.leaderElection
    ? new LeaderElector(
        clientsFor('leader_election').coordination,
        config.leaderElectionNamespace,
        config.leaseName,
        config.identity,
        { leaseDurationSeconds: config.leaseDurationSeconds, retryPeriodMs: Math.max(500, (config.leaseDurationSeconds * 1000) / 5) },
        log,
      )
    : undefined;

  let stopping = false;
  const stopControllers = async (): Promise<void> => {
    await Promise.all(controllers.map((c) => c.stop()));
  };
  const stop = async (code: number): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log.info('operator stopping');
    await stopControllers();
    await elector?.release();
    caches.stop();
    server.close();
    process.exit(code);
  };
  process.once('SIGTERM', () => void stop(0));
  process.once('SIGINT', () => void stop(0));

  // Lead, act until the lease is lost, stop acting (queues shut down, in-flight reconciles
  // finished; the caches go on), campaign again. An API server outage longer than the lease
  // costs a new term of the workers, not a restart of the process.
  const lead = async (): Promise<void> => {
    while (!stopping) {
      let lost: () => void = () => undefined;
      const lostLease = new Promise<void>((resolve) => (lost = resolve));
      if (elector) {
        await elector.acquire((reason) => {
          log.error('lost leadership, stopping the controllers', { reason });
          lost();
        });
      }
      if (stopping) return;
      for (const c of controllers) void c.start();
      leading = true;
      metrics.leader.set(1);
      log.info('operator started', { namespace: config.namespace ?? '(all)', leaderElection: config.leaderElection });
      await lostLease;
      leading = false;
      metrics.leader.set(0);
      await stopControllers();
    }
  };
  void lead().catch((err: unknown) => {
    // A campaign cut short by SIGTERM is the normal way for a standby to stop.
    if (stopping) return;
    log.error('operator failed', { error: err instanceof Error ? err.message : String(err) });
    process.exit(1);
  });
}
