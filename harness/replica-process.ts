import { parsePrometheus, spawnModelmux, waitListeningAndReady } from './modelmux-process.js';

export { parsePrometheus } from './modelmux-process.js';

/** A `modelmux replica` child process listening on 127.0.0.1. */
export interface ReplicaProcess {
  /** e.g. `http://127.0.0.1:40123` */
  url: string;
  port: number;
  /** The gRPC service's `host:port` (grpc-js address form), unless started with --grpc-port=-1. */
  grpcAddress: string | undefined;
  pid: number;
  /** stdout+stderr so far. */
  logs(): string;
  /** The JSON log lines so far (non-JSON lines skipped). */
  logLines(): Record<string, unknown>[];
  /** GET /metrics parsed: `name{labels}` → value, and `name` → sum over its label sets. */
  metrics(): Promise<Map<string, number>>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code. */
  stop(graceMs?: number): Promise<number | null>;
  /** Resolves when the process exits (for tests that signal it themselves). */
  exited: Promise<number | null>;
}

export interface ReplicaProcessOptions {
  /** Flags after `replica`; --host/--port default to 127.0.0.1 and 0. */
  args?: string[];
  /** Added to a copy of process.env. */
  env?: Record<string, string>;
  /** Bind address (any 127.0.0.0/8 address). */
  host?: string;
  /** Default 0: any free port, read from the listening line. */
  port?: number;
  /** Default 0: any free port, read from the listening line; -1 serves no gRPC. */
  grpcPort?: number;
  readyTimeoutMs?: number;
}

/**
 * Starts `node dist/cli/main.js replica` (run `npm run build` first) and waits until
 * `/v2/health/ready` answers 200. The port is read from the replica's "listening" log line.
 */
export async function startReplica(options: ReplicaProcessOptions = {}): Promise<ReplicaProcess> {
  const host = options.host ?? '127.0.0.1';
  const p = spawnModelmux('replica', ['--host', host, '--port', String(options.port ?? 0), `--grpc-port=${options.grpcPort ?? 0}`, ...(options.args ?? [])], options.env);
  const { url, port } = await waitListeningAndReady(p, 'replica', (l) => l['event'] === 'listening', host, '/v2/health/ready', options.readyTimeoutMs ?? 20_000, options.port);
  // Ready means listened: the listening line, which names the gRPC port, was written before.
  const grpcPort = p.logLines().find((l) => l['event'] === 'listening')?.['grpcPort'];
  return {
    url,
    port,
    grpcAddress: typeof grpcPort === 'number' ? `${host}:${grpcPort}` : undefined,
    pid: p.pid,
    logs: p.logs,
    logLines: p.logLines,
    metrics: async () => parsePrometheus(await (await fetch(`${url}/metrics`)).text()),
    stop: p.stop,
    exited: p.exited,
  };
}
