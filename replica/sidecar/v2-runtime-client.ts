import { Pool } from 'undici';
import { ModelmuxError } from '../../common/errors.js';

/** What a serving runtime answered, read whole: the sidecar passes bodies through untouched. */
export interface RuntimeAnswer {
  status: number;
  contentType: string | undefined;
  body: Buffer;
  /** The V2 binary extension's header, when the answer carries binary tensor data. */
  headerLength: string | undefined;
}

export interface V2RuntimeClientOptions {
  /** e.g. http://127.0.0.1:8081: MLServer's or Triton's V2 HTTP address. */
  url: string;
  /** A load may take long (the runtime imports its library, reads the model); a request shorter. */
  loadTimeoutMs: number;
  probeTimeoutMs: number;
}

const HEADER_LENGTH = 'inference-header-content-length';
/** Connections kept to the runtime at most; requests past them queue in the pool. */
const RUNTIME_CONNECTIONS = 64;

/**
 * The Open Inference Protocol (V2) over HTTP as MLServer and Triton speak it, with the model
 * repository extension (`/v2/repository/...`) that loads and unloads models on demand.
 */
export class V2RuntimeClient {
  private readonly base: string;
  /** Kept-alive connections to the runtime: undici's pool costs less CPU per request than fetch. */
  private readonly pool: Pool;

  constructor(private readonly opts: V2RuntimeClientOptions) {
    this.base = opts.url.replace(/\/+$/, '');
    this.pool = new Pool(this.base, { connections: RUNTIME_CONNECTIONS });
  }

  get url(): string {
    return this.base;
  }

  /**
   * 'ready' when the runtime answers ready; 'unready' when it answers not ready (MLServer does
   * so while any model loads or unloads, for milliseconds); 'down' when it cannot be reached;
   * 'slow' when it did not answer within the probe timeout (a runtime busy loading a model may
   * hold its event loop for seconds).
   */
  async ready(): Promise<'ready' | 'unready' | 'down' | 'slow'> {
    try {
      return (await this.forward('/v2/health/ready', undefined, undefined, this.opts.probeTimeoutMs)).status === 200 ? 'ready' : 'unready';
    } catch (err) {
      return err instanceof RuntimeTimeout ? 'slow' : 'down';
    }
  }

  /** The names of the models the runtime has ready now, by the repository index. */
  async readyModels(): Promise<Set<string>> {
    const answer = await this.call('/v2/repository/index', { ready: true }, this.opts.probeTimeoutMs);
    if (answer.status !== 200) throw new ModelmuxError('runtime_unavailable', `the runtime's repository index answered ${answer.status}`);
    const rows: unknown = JSON.parse(answer.body.toString('utf8'));
    const names = new Set<string>();
    if (!Array.isArray(rows)) return names;
    for (const row of rows) {
      const r = row as { name?: unknown; state?: unknown };
      // Triton lists every model with its state even when asked for ready ones only.
      if (typeof r.name === 'string' && (r.state === undefined || r.state === 'READY')) names.add(r.name);
    }
    return names;
  }

  /** Throws ModelmuxError `model_load_failed` when the runtime refuses the model, `runtime_unavailable` when it cannot be asked. */
  async load(id: string): Promise<void> {
    const answer = await this.call(`/v2/repository/models/${encodeURIComponent(id)}/load`, {}, this.opts.loadTimeoutMs);
    if (answer.status === 200) return;
    if (answer.status >= 502) throw new ModelmuxError('runtime_unavailable', `the runtime answered ${answer.status} to the load of model "${id}"`);
    throw new ModelmuxError('model_load_failed', `the runtime refused to load model "${id}" (${answer.status}): ${reason(answer.body)}`);
  }

  /** A model the runtime does not hold (404) counts as unloaded. */
  async unload(id: string): Promise<void> {
    const answer = await this.call(`/v2/repository/models/${encodeURIComponent(id)}/unload`, {}, this.opts.loadTimeoutMs);
    if (answer.status !== 200 && answer.status !== 404) throw new Error(`the runtime answered ${answer.status} to the unload of model "${id}": ${reason(answer.body)}`);
  }

  /**
   * Forwards one V2 request (`/v2/models/<id>/infer` or the metadata GET) as it came. A request
   * whose kept-alive connection the runtime had closed is sent once more on a new one: uvicorn
   * (MLServer) closes a connection after a handler's exception without saying so in the answer,
   * and the next request on it meets a reset. Every call here may be repeated (probes and the
   * index read, load and unload of the same model, inference without side effects).
   */
  async forward(path: string, body: Buffer | undefined, headerLength: string | undefined, timeoutMs: number): Promise<RuntimeAnswer> {
    try {
      return await this.send(path, body, headerLength, timeoutMs);
    } catch (err) {
      if (!connectionClosed(err)) throw unreachable(err);
    }
    try {
      return await this.send(path, body, headerLength, timeoutMs);
    } catch (err) {
      throw unreachable(err);
    }
  }

  private async send(path: string, body: Buffer | undefined, headerLength: string | undefined, timeoutMs: number): Promise<RuntimeAnswer> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = headerLength !== undefined ? 'application/octet-stream' : 'application/json';
    if (headerLength !== undefined) headers[HEADER_LENGTH] = headerLength;
    const res = await this.pool.request({
      path,
      method: body === undefined ? 'GET' : 'POST',
      headers,
      ...(body !== undefined ? { body } : {}),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const header = (name: string): string | undefined => {
      const v = res.headers[name];
      return Array.isArray(v) ? v[0] : v;
    };
    return { status: res.statusCode, contentType: header('content-type'), body: Buffer.from(await res.body.arrayBuffer()), headerLength: header(HEADER_LENGTH) };
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  private async call(path: string, json: unknown, timeoutMs: number): Promise<RuntimeAnswer> {
    return this.forward(path, Buffer.from(JSON.stringify(json)), undefined, timeoutMs);
  }
}

/** A request the runtime did not answer in time: it is up, but busy. */
export class RuntimeTimeout extends ModelmuxError {
  constructor() {
    super('runtime_unavailable', 'the runtime did not answer in time');
  }
}

/** The connection was closed or reset under the request (not refused, not timed out). */
function connectionClosed(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE';
}

function unreachable(err: unknown): ModelmuxError {
  const code = (err as { code?: unknown }).code;
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') return new RuntimeTimeout();
  return new ModelmuxError('runtime_unavailable', `the runtime cannot be reached: ${err instanceof Error ? ((err.cause as Error | undefined)?.message ?? err.message) : String(err)}`);
}

/** The runtime's error message (MLServer: `error`, Triton: `error`, FastAPI: `detail`), else the body's start. */
function reason(body: Buffer): string {
  const text = body.toString('utf8');
  try {
    const parsed = JSON.parse(text) as { error?: unknown; detail?: unknown };
    if (typeof parsed.error === 'string') return parsed.error;
    if (parsed.detail !== undefined) return JSON.stringify(parsed.detail).slice(0, 500);
  } catch {
    // not JSON: MLServer answers a crashed load with a plain "Internal Server Error"
  }
  return text.slice(0, 500);
}
