import { freePorts } from '../cli/local-processes.js';
import { parsePrometheus, spawnModelmux, waitListeningAndReady } from './modelmux-process.js';

/** A `modelmux router` child process listening on 127.0.0.1. */
export interface RouterProcess {
  /** The public port: what clients call. */
  url: string;
  port: number;
  /** The admin port (/metrics, /routes, the model repository API), e.g. `http://127.0.0.1:40124`. */
  adminUrl: string;
  adminPort: number;
  /** The process id (for what only the OS tells, such as the CPU time of each of its threads). */
  pid: number;
  /** The gRPC port's `host:port` (grpc-js address form), unless started with --grpc-port=-1. */
  grpcAddress: string | undefined;
  logs(): string;
  /** The JSON log lines so far. */
  logLines(): Record<string, unknown>[];
  /** The admin port's /metrics, parsed. */
  metrics(): Promise<Map<string, number>>;
  stop(graceMs?: number): Promise<number | null>;
}

/**
 * Starts `node dist/cli/main.js router --host 127.0.0.1 --port 0 --grpc-port=0 --admin-port=0 …`
 * (build first) and waits for its "router listening" line and a 200 from /readyz. A --grpc-port
 * in `args` wins. With `knownPort` (a router above log level info writes no listening line) the
 * admin port is chosen here too.
 */
export async function startRouter(args: string[], env: Record<string, string> = {}, readyTimeoutMs = 20_000, knownPort?: number): Promise<RouterProcess> {
  const knownAdminPort = knownPort === undefined ? undefined : (await freePorts(1))[0];
  const p = spawnModelmux('router', ['--host', '127.0.0.1', '--port', String(knownPort ?? 0), '--grpc-port=0', `--admin-port=${knownAdminPort ?? 0}`, ...args], env);
  const { url, port } = await waitListeningAndReady(p, 'router', (l) => l['msg'] === 'router listening', '127.0.0.1', '/readyz', readyTimeoutMs, knownPort);
  const listening = p.logLines().find((l) => l['msg'] === 'router listening');
  const grpcPort = listening?.['grpcPort'];
  const adminPort = knownAdminPort ?? listening?.['adminPort'];
  if (typeof adminPort !== 'number') {
    await p.stop(1000);
    throw new Error(`the router has no admin port:\n${p.logs()}`);
  }
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  return {
    url,
    port,
    adminUrl,
    adminPort,
    pid: p.pid,
    grpcAddress: typeof grpcPort === 'number' ? `127.0.0.1:${grpcPort}` : undefined,
    logs: p.logs,
    logLines: p.logLines,
    metrics: async () => parsePrometheus(await (await fetch(`${adminUrl}/metrics`)).text()),
    stop: p.stop,
  };
}
