import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { z } from 'zod';
import { booleanString, parseConfig, type OptionSpecs, intString } from '../common/config.js';
import { createLogger, type Logger } from '../common/log.js';
import { REPLICA_ENV } from '../common/replica-env.js';
import { INTRA_OP_THREADS } from '../common/resource.js';
import { checkLocalRoutes } from './local-routes.js';
import { writeExampleModels } from './example-models.js';
import { DEFAULT_ADMIN_PORT } from '../router/http1/admin-server.js';
import { DEFAULT_GRPC_PORT } from '../router/grpc/grpc-options.js';
import { GRPC_PORT_PARAM } from '../router/discovery/static-discovery.js';
import { bannerText } from './local-banner.js';
import { LOCAL_RESTART_BACKOFF } from './local-backoff.js';
import { freePorts, waitReady } from './local-processes.js';
import { Supervised, type ProcessSpec } from './local-supervisor.js';
import { logOptionSpecs, logOptionsShape } from '../common/log-options.js';
import { s3OptionSpecs, s3OptionsShape } from '../common/s3-options.js';

const SUMMARY =
  'Run the whole pool on this machine, without Kubernetes: N replica processes and a router with\n' +
  'static discovery. With a file:// store (the default, ./models) the example models are written\n' +
  'first when missing. Prints the URL and a curl command per request form. A process that dies is\n' +
  `restarted after ${LOCAL_RESTART_BACKOFF.initialMs / 1000} s, doubling to ${LOCAL_RESTART_BACKOFF.maxMs / 1000} s while it keeps dying; the others keep serving.\n` +
  'Ctrl-C stops everything.';

/** What a `--runtime` command is told: where to listen and which folder holds its models. */
export const RUNTIME_ENV = {
  port: 'MODELMUX_RUNTIME_PORT',
  grpcPort: 'MODELMUX_RUNTIME_GRPC_PORT',
  metricsPort: 'MODELMUX_RUNTIME_METRICS_PORT',
  modelsDir: REPLICA_ENV.runtimeModelsDir,
} as const;

const schema = z.object({
  replicas: intString(1, 64).default(3),
  maxModels: intString(1, 10000).default(3),
  modelSource: z
    .string()
    .regex(/^(s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?|file:\/\/\/.*)$/, 'must be s3://bucket[/prefix] or file:///dir')
    .optional(),
  exampleModels: intString(0, 100000).default(20),
  host: z.string().min(1).default('127.0.0.1'),
  port: intString(0, 65535).default(8000),
  grpcPort: intString(-1, 65535).default(DEFAULT_GRPC_PORT),
  adminPort: intString(-1, 65535).default(DEFAULT_ADMIN_PORT),
  routePrefix: z
    .string()
    .regex(/^\/[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be one path segment such as /wine')
    .max(64)
    .default('/wine'),
  maxOngoingRequests: intString(1, 100000).default(16),
  maxBatchSize: intString(1, 1024).default(1),
  batchWaitMs: intString(0, 10000).default(0),
  intraOpThreads: intString(INTRA_OP_THREADS.min, INTRA_OP_THREADS.max).default(INTRA_OP_THREADS.default),
  ...s3OptionsShape,
  ...logOptionsShape,
  readyTimeoutSeconds: intString(1, 3600).default(120),
  runtime: z.string().min(1).max(4096).optional(),
  routes: z.string().min(1).max(4096).optional(),
  verbose: booleanString.default(false),
});

type LocalConfig = z.infer<typeof schema>;

const specs: OptionSpecs<typeof schema.shape> = {
  replicas: { flag: 'replicas', env: 'MODELMUX_LOCAL_REPLICAS', help: 'Replica processes (default 3).' },
  maxModels: { flag: 'max-models', env: REPLICA_ENV.maxModels, help: 'Models each replica keeps loaded (LRU; default 3).' },
  modelSource: { flag: 'model-source', env: REPLICA_ENV.modelSource, help: 'Model store: file:///dir or s3://bucket/prefix (default file://<cwd>/models).' },
  exampleModels: { flag: 'example-models', env: 'MODELMUX_LOCAL_EXAMPLE_MODELS', help: 'Example models wine-0 … wine-N-1 written to a file:// store when missing; 0 writes none (default 20).' },
  host: { flag: 'host', env: 'MODELMUX_LOCAL_HOST', help: 'Address the router listens on (default 127.0.0.1; replicas always use 127.0.0.1).' },
  port: { flag: 'port', env: 'MODELMUX_LOCAL_PORT', help: 'Router port; 0 picks a free one (default 8000).' },
  grpcPort: {
    flag: 'grpc-port',
    env: 'MODELMUX_LOCAL_GRPC_PORT',
    help: `Router gRPC port (the Open Inference Protocol's gRPC service, docs/grpc.md); 0 picks a free one, -1 serves no gRPC (default ${DEFAULT_GRPC_PORT}). Replicas get free ones.`,
  },
  adminPort: {
    flag: 'admin-port',
    env: 'MODELMUX_LOCAL_ADMIN_PORT',
    help: `Router admin port: /metrics, /routes and the model repository API (load, unload, index), on 127.0.0.1 whatever --host is; 0 picks a free one, -1 none (default ${DEFAULT_ADMIN_PORT}).`,
  },
  routePrefix: { flag: 'route-prefix', env: 'MODELMUX_LOCAL_ROUTE_PREFIX', help: 'Path prefix of the pool (default /wine).' },
  maxOngoingRequests: { flag: 'max-ongoing-requests', env: REPLICA_ENV.maxOngoingRequests, help: 'In-flight requests per replica at most (default 16).' },
  maxBatchSize: {
    flag: 'max-batch-size',
    env: REPLICA_ENV.maxBatchSize,
    help: 'Requests of one model run as one batch at most, for models whose config.json turns batching on and names no size (default 1: such models get 8).',
  },
  batchWaitMs: {
    flag: 'batch-wait-ms',
    env: REPLICA_ENV.batchWaitMs,
    help: 'How long the first request of a batch waits for others, for models whose config.json turns batching on and names no wait (default 0).',
  },
  intraOpThreads: {
    flag: 'intra-op-threads',
    env: REPLICA_ENV.intraOpThreads,
    help: `Threads one run of a model may use in each replica, unless its config.json says otherwise (default ${INTRA_OP_THREADS.default}).`,
  },
  ...s3OptionSpecs,
  logLevel: {
    ...logOptionSpecs.logLevel,
    help: 'Lowest level of the log lines the replicas, the router and this command write: info, warn or error (default info). --verbose shows what they write.',
  },
  readyTimeoutSeconds: { flag: 'ready-timeout-seconds', env: 'MODELMUX_LOCAL_READY_TIMEOUT_SECONDS', help: 'How long to wait for every process to be ready (default 120).' },
  runtime: {
    flag: 'runtime',
    env: 'MODELMUX_LOCAL_RUNTIME',
    help: `Sidecar mode: a serving runtime command (MLServer, Triton) run by /bin/sh -c beside each replica, which loads the models into it (docs/sidecar.md); it gets ${RUNTIME_ENV.port} (its V2 HTTP port), ${RUNTIME_ENV.grpcPort}, ${RUNTIME_ENV.metricsPort} and ${RUNTIME_ENV.modelsDir} (its model repository). Default: none, the built-in onnxruntime engine.`,
  },
  routes: {
    flag: 'routes',
    env: 'MODELMUX_LOCAL_ROUTES',
    help: 'A YAML file of ModelRoute objects (weighted canaries, sticky routing, mirrors, ensembles, sequences; docs/routes.md) the router serves; their spec.deploymentRef.name is the pool, the route prefix without its slash (default: none).',
  },
  verbose: { flag: 'verbose', env: 'MODELMUX_LOCAL_VERBOSE', help: 'Show every log line of the replicas and the router (default: warnings and errors only).' },
};

/** Environment of replica `i`: the same variables the operator writes into a pod. */
function replicaEnv(
  config: LocalConfig,
  modelSource: string,
  dirs: { cacheDir: string; sharedCacheDir: string } | undefined,
  port: number,
  grpcPort: number,
  i: number,
  base: NodeJS.ProcessEnv,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...base,
    [REPLICA_ENV.host]: '127.0.0.1',
    [REPLICA_ENV.port]: String(port),
    [REPLICA_ENV.grpcPort]: String(grpcPort),
    [REPLICA_ENV.modelSource]: modelSource,
    [REPLICA_ENV.maxModels]: String(config.maxModels),
    [REPLICA_ENV.maxOngoingRequests]: String(config.maxOngoingRequests),
    [REPLICA_ENV.maxBatchSize]: String(config.maxBatchSize),
    [REPLICA_ENV.batchWaitMs]: String(config.batchWaitMs),
    [REPLICA_ENV.intraOpThreads]: String(config.intraOpThreads),
    [REPLICA_ENV.s3Region]: config.s3Region,
    [REPLICA_ENV.replicaName]: `replica-${i}`,
    [REPLICA_ENV.logLevel]: config.logLevel,
  };
  if (dirs !== undefined) {
    env[REPLICA_ENV.cacheDir] = dirs.cacheDir;
    env[REPLICA_ENV.sharedCacheDir] = dirs.sharedCacheDir;
  }
  if (config.s3Endpoint !== undefined) env[REPLICA_ENV.s3Endpoint] = config.s3Endpoint;
  if (config.s3ForcePathStyle !== undefined) env[REPLICA_ENV.s3ForcePathStyle] = String(config.s3ForcePathStyle);
  // Local processes are not pods: a stray POD_NAME would make a replica try to patch its pod.
  delete env[REPLICA_ENV.podName];
  delete env[REPLICA_ENV.podNamespace];
  return env;
}

/** `modelmux router` with static discovery over the local replicas. */
function routerArgs(config: LocalConfig, port: number, grpcPort: number, adminPort: number, replicaUrls: readonly string[], routesFile: string | undefined): string[] {
  const routes = routesFile === undefined ? [] : ['--routes-file', routesFile];
  return [
    'router',
    '--discovery',
    'static',
    '--host',
    config.host,
    '--port',
    String(port),
    '--grpc-port',
    String(grpcPort),
    // The repository API can unload every model: it stays on this machine even when --host opens the router.
    '--admin-host',
    '127.0.0.1',
    '--admin-port',
    String(adminPort),
    '--routes',
    `${config.routePrefix}=${replicaUrls.join(',')}`,
    '--max-ongoing-requests',
    String(config.maxOngoingRequests),
    '--log-level',
    config.logLevel,
    ...routes,
  ];
}

function displayHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

export function parseLocalConfig(argv: readonly string[], env: NodeJS.ProcessEnv): z.infer<typeof schema> {
  return parseConfig('local', SUMMARY, schema, specs, argv, env);
}

/** The example models are ONNX, written to a file:// store when missing: a runtime serves models in its own layout. */
async function writeExamplesIfMissing(config: LocalConfig, modelSource: string, log: Logger): Promise<void> {
  if (!modelSource.startsWith('file://') || config.exampleModels <= 0 || config.runtime !== undefined) return;
  const report = await writeExampleModels({ kind: 'file', dir: fileURLToPath(modelSource) }, { prefix: 'wine-', count: config.exampleModels }, { region: config.s3Region });
  if (report.written.length > 0) log.info('wrote example models', { dir: fileURLToPath(modelSource), written: report.written.length });
}

interface LocalPorts {
  router: number;
  routerGrpc: number;
  routerAdmin: number;
  /** Replica i's HTTP port at i, its gRPC port at i of `replicaGrpc`. */
  replicas: number[];
  replicaGrpc: number[];
  /** Sidecar mode: runtime i's HTTP, gRPC and metrics ports at 3i, 3i+1 and 3i+2. */
  runtimes: number[];
}

async function allocatePorts(config: LocalConfig): Promise<LocalPorts> {
  const runtimes = config.runtime === undefined ? [] : await freePorts(3 * config.replicas);
  // One call, so that every port is distinct: the replicas' HTTP and gRPC ports, and the router's when free ones are asked for.
  const ports = await freePorts(2 * config.replicas + (config.port === 0 ? 1 : 0) + (config.grpcPort === 0 ? 1 : 0) + (config.adminPort === 0 ? 1 : 0));
  const routerAdmin = config.adminPort === 0 ? (ports.pop() ?? 0) : config.adminPort;
  const routerGrpc = config.grpcPort === 0 ? (ports.pop() ?? 0) : config.grpcPort;
  const router = config.port === 0 ? (ports.pop() ?? 0) : config.port;
  const replicaGrpc = ports.splice(config.replicas);
  return { router, routerGrpc, routerAdmin, replicas: ports, replicaGrpc, runtimes };
}

/** Sidecar mode: runtime `i`'s process, and the variables that tell its replica where it is. */
async function runtimeProcess(command: string, i: number, poolDir: string, ports: readonly number[], env: NodeJS.ProcessEnv): Promise<{ spec: ProcessSpec; replicaVars: NodeJS.ProcessEnv }> {
  const [http, grpc, metrics] = ports.slice(3 * i, 3 * i + 3).map(String);
  const modelsDir = join(poolDir, `runtime-${i}`);
  await mkdir(modelsDir, { recursive: true });
  const runtimeEnv = { ...env, [RUNTIME_ENV.port]: http, [RUNTIME_ENV.grpcPort]: grpc, [RUNTIME_ENV.metricsPort]: metrics, [RUNTIME_ENV.modelsDir]: modelsDir };
  const readyUrl = `http://127.0.0.1:${http}/v2/health/ready`;
  return {
    spec: { name: `runtime-${i}`, program: '/bin/sh', script: '-c', args: [command], env: runtimeEnv, readyUrl },
    replicaVars: { [REPLICA_ENV.runtimeUrl]: `http://127.0.0.1:${http}`, [REPLICA_ENV.runtimeModelsDir]: modelsDir },
  };
}

function banner(config: LocalConfig, ports: LocalPorts, replicaUrls: readonly string[], modelSource: string): string {
  // Three different models when there are three, so the examples show the pool's routing.
  const shown = Math.max(1, config.exampleModels);
  const exampleIds = [`wine-${0 % shown}`, `wine-${1 % shown}`, `wine-${2 % shown}`] as const;
  return bannerText({
    routerUrl: `http://${displayHost(config.host)}:${ports.router}`,
    routerGrpc: config.grpcPort === -1 ? undefined : `${displayHost(config.host)}:${ports.routerGrpc}`,
    adminUrl: config.adminPort === -1 ? undefined : `http://127.0.0.1:${ports.routerAdmin}`,
    routePrefix: config.routePrefix,
    replicaUrls,
    maxModels: config.maxModels,
    modelSource,
    exampleIds,
    exampleModelCount: modelSource.startsWith('file://') ? config.exampleModels : 0,
    restart: LOCAL_RESTART_BACKOFF,
  });
}

export async function run(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const config = parseLocalConfig(argv, env);
  const log = createLogger({ component: 'local' }, undefined, config.logLevel);
  const routesFile = config.routes === undefined ? undefined : resolve(process.cwd(), config.routes);
  // Checked here, before any process starts: the router would refuse it at every restart.
  if (routesFile !== undefined) checkLocalRoutes(routesFile, config.routePrefix.slice(1));
  const modelSource = config.modelSource ?? pathToFileURL(resolve(process.cwd(), 'models')).href;
  await writeExamplesIfMissing(config, modelSource, log);

  const ports = await allocatePorts(config);
  const mainScript = fileURLToPath(new URL('./main.js', import.meta.url));
  const supervised: Supervised[] = [];
  let stopping: Promise<void> | undefined;
  // S3 downloads: one folder per replica, the same one again after a restart (whose start empties
  // it of the killed process's files), beside the folder they share (PeerFiles needs one filesystem).
  const poolDir = modelSource.startsWith('s3://') || config.runtime !== undefined ? await mkdtemp(join(tmpdir(), 'modelmux-local-')) : undefined;
  const readyTimeoutMs = config.readyTimeoutSeconds * 1000;
  const supervise = (spec: ProcessSpec): Supervised => {
    const s = new Supervised(spec, config.verbose, log, LOCAL_RESTART_BACKOFF, readyTimeoutMs);
    supervised.push(s);
    return s;
  };

  const stopAll = (): Promise<void> => {
    // The router first, so it stops taking requests before the replicas behind it go.
    stopping ??= (async () => {
      const [router, ...replicas] = [...supervised].reverse();
      if (router) await router.stop();
      await Promise.all(replicas.map((s) => s.stop()));
      if (poolDir !== undefined) await rm(poolDir, { recursive: true, force: true });
    })();
    return stopping;
  };

  const replicaUrls: string[] = [];
  const replicaProcs: Supervised[] = [];
  const runtimes: { url: string; proc: Supervised }[] = [];
  for (let i = 0; i < config.replicas; i++) {
    const port = ports.replicas[i] ?? 0;
    const grpcPort = ports.replicaGrpc[i] ?? 0;
    const url = `http://127.0.0.1:${port}`;
    replicaUrls.push(url);
    const dirs = poolDir === undefined ? undefined : { cacheDir: join(poolDir, `replica-${i}`), sharedCacheDir: join(poolDir, 'shared') };
    const replica = replicaEnv(config, modelSource, dirs, port, grpcPort, i, env);
    if (config.runtime !== undefined && poolDir !== undefined) {
      const runtime = await runtimeProcess(config.runtime, i, poolDir, ports.runtimes, env);
      runtimes.push({ url: runtime.spec.readyUrl, proc: supervise(runtime.spec) });
      Object.assign(replica, runtime.replicaVars);
    }
    replicaProcs.push(supervise({ name: `replica-${i}`, script: mainScript, args: ['replica'], env: replica, readyUrl: `${url}/v2/health/ready` }));
  }

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals++;
    if (signals > 1) {
      for (const s of supervised) s.kill();
      return;
    }
    log.info('stopping', { signal });
    void stopAll().then(removeSignalHandlers);
  };
  const removeSignalHandlers = (): void => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    const deadline = Date.now() + readyTimeoutMs;
    // A runtime that cannot start is reported with its own last lines, not as a replica never ready.
    await Promise.all(runtimes.map((r) => waitReady(r.url, deadline, r.proc.current)));
    await Promise.all(replicaUrls.map((u, i) => waitReady(`${u}/v2/health/ready`, deadline, replicaProcs[i]?.current)));
    const routerReady = `http://127.0.0.1:${ports.router}/readyz`;
    const routerReplicas = replicaUrls.map((u, i) => `${u}?${GRPC_PORT_PARAM}=${ports.replicaGrpc[i] ?? 0}`);
    const router = supervise({
      name: 'router',
      script: mainScript,
      args: routerArgs(config, ports.router, ports.routerGrpc, ports.routerAdmin, routerReplicas, routesFile),
      env,
      readyUrl: routerReady,
    });
    await waitReady(routerReady, deadline, router.current);
  } catch (err) {
    await stopAll();
    removeSignalHandlers();
    throw err;
  }
  if (stopping) return;
  // From here on a process that dies is restarted rather than taking the pool down.
  for (const s of supervised) s.supervise();
  process.stdout.write(banner(config, ports, replicaUrls, modelSource));
}
