import { parsePrometheus, spawnModelmux, waitListeningAndReady } from './modelmux-process.js';

/** A `modelmux router` child process listening on 127.0.0.1. */
export interface RouterProcess {
  url: string;
  port: number;
  /** The process id (for what only the OS tells, such as the CPU time of each of its threads). */
  pid: number;
  /** The gRPC port's `host:port` (grpc-js address form), unless started with --grpc-port=-1. */
  grpcAddress: string | undefined;
  logs(): string;
  /** The JSON log lines so far. */
  logLines(): Record<string, unknown>[];
  metrics(): Promise<Map<string, number>>;
  stop(graceMs?: number): Promise<number | null>;
}

/**
 * Starts `node dist/cli/main.js router --host 127.0.0.1 --port 0 --grpc-port=0 …` (build first)
 * and waits for its "router listening" line and a 200 from /readyz. A --grpc-port in `args` wins.
 */
export async function startRouter(args: string[], env: Record<string, string> = {}, readyTimeoutMs = 20_000, knownPort?: number): Promise<RouterProcess> {
  const p = spawnModelmux('router', ['--host', '127.0.0.1', '--port', String(knownPort ?? 0), '--grpc-port=0', ...args], env);
  const { url, port } = await waitListeningAndReady(p, 'router', (l) => l['msg'] === 'router listening', '127.0.0.1', '/readyz', readyTimeoutMs, knownPort);
  const grpcPort = p.logLines().find((l) => l['msg'] === 'router listening')?.['grpcPort'];
  return { url, port, pid: p.pid, grpcAddress: typeof grpcPort === 'number' ? `127.0.0.1:${grpcPort}` : undefined, logs: p.logs, logLines: p.logLines, metrics: async () => parsePrometheus(await (await fetch(`${url}/metrics`)).text()), stop: p.stop };
}
