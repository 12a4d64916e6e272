import { ModelmuxError } from '../../common/errors.js';
import type { DownstreamRequest, DownstreamResponse } from '../http1/downstream.js';
import { runtimeError } from './runtime-errors.js';
import { runtimeHeaderProblem, runtimeTarget } from './runtime-path.js';

const CUSTOM_ATTRIBUTES = 'x-amzn-sagemaker-custom-attributes';
const INFERENCE_ID = 'x-amzn-sagemaker-inference-id';
/** The variant SageMaker names an endpoint's only production variant by default; a pool has one. */
const INVOKED_VARIANT = 'AllTraffic';
/** An error answer is read whole to be rewritten; errors are small, and a longer one is cut here. */
const MAX_ERROR_BYTES = 64 * 1024;
/** Headers of an error answer that still hold after it is rewritten (router/http1/error-headers.ts). */
const KEPT_ON_ERROR = new Set(['retry-after', 'connection', 'x-request-id']);

function rawHeader(raw: readonly string[], name: string): string | undefined {
  for (let i = 0; i < raw.length; i += 2) if ((raw[i] as string).toLowerCase() === name) return raw[i + 1];
  return undefined;
}

/** The client's request as the pool's `POST /invocations`: only its target differs. */
class RuntimeRequest implements DownstreamRequest {
  constructor(
    private readonly inner: DownstreamRequest,
    readonly url: string,
  ) {}
  get method(): string | undefined {
    return this.inner.method;
  }
  get rawHeaders(): string[] {
    return this.inner.rawHeaders;
  }
  get socket(): DownstreamRequest['socket'] {
    return this.inner.socket;
  }
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
  on(event: 'data' | 'end', listener: ((chunk: Buffer) => void) & (() => void)): unknown {
    return this.inner.on(event as 'data', listener);
  }
  release(chunk: Buffer): void {
    this.inner.release?.(chunk);
  }
}

/**
 * The answer as the runtime API gives it: a success carries SageMaker's response headers
 * (x-Amzn-Invoked-Production-Variant, and the request's CustomAttributes echoed unless the model
 * set its own); an error is read whole and answered in the shape botocore parses (runtime-errors.ts).
 */
export class RuntimeResponse implements DownstreamResponse {
  private failed: { status: number; headers: string[]; chunks: Buffer[]; bytes: number } | undefined;

  constructor(
    private readonly inner: DownstreamResponse,
    private readonly customAttributes: string | undefined,
  ) {}

  get headersSent(): boolean {
    return this.failed !== undefined || this.inner.headersSent;
  }
  get destroyed(): boolean {
    return this.inner.destroyed;
  }
  get writableFinished(): boolean {
    return this.inner.writableFinished;
  }
  setHeader(name: string, value: string): unknown {
    return this.inner.setHeader(name, value);
  }

  writeHead(status: number, headers: string[]): DownstreamResponse {
    if (status >= 400) {
      this.failed = { status, headers, chunks: [], bytes: 0 };
      return this;
    }
    const out = [...headers, 'x-amzn-invoked-production-variant', INVOKED_VARIANT];
    if (this.customAttributes !== undefined && rawHeader(headers, CUSTOM_ATTRIBUTES) === undefined) out.push(CUSTOM_ATTRIBUTES, this.customAttributes);
    this.inner.writeHead(status, out);
    return this;
  }

  write(chunk: Buffer): boolean {
    const f = this.failed;
    if (f === undefined) return this.inner.write(chunk);
    if (f.bytes < MAX_ERROR_BYTES) {
      const part = chunk.subarray(0, MAX_ERROR_BYTES - f.bytes);
      f.chunks.push(part);
      f.bytes += part.length;
    }
    return true;
  }

  end(data?: string): unknown {
    const f = this.failed;
    if (f === undefined) return this.inner.end(data);
    if (data !== undefined) this.write(Buffer.from(data));
    const e = runtimeError(f.status, Buffer.concat(f.chunks).toString('utf8'));
    const headers = ['content-type', 'application/json', 'x-amzn-errortype', e.type];
    for (let i = 0; i < f.headers.length; i += 2) if (KEPT_ON_ERROR.has((f.headers[i] as string).toLowerCase())) headers.push(f.headers[i] as string, f.headers[i + 1] as string);
    return this.inner.writeHead(e.status, headers).end(e.body);
  }

  destroy(): unknown {
    return this.inner.destroy();
  }
  on(event: 'close', listener: () => void): unknown {
    return this.inner.on(event, listener);
  }
}

/**
 * A SageMaker runtime API call as the request the router serves (its pool's `POST /invocations`)
 * and the response that answers it in the API's shape, with the refusal SageMaker would give, if
 * any; undefined for any other request.
 */
export function runtimeInvocation(req: DownstreamRequest, res: DownstreamResponse): { req: DownstreamRequest; res: DownstreamResponse; refusal?: ModelmuxError } | undefined {
  const t = runtimeTarget(req.method ?? 'GET', req.url ?? '/');
  if (t.kind === 'none') return undefined;
  const attributes = rawHeader(req.rawHeaders, CUSTOM_ATTRIBUTES);
  const out = { req: new RuntimeRequest(req, t.url), res: new RuntimeResponse(res, attributes) };
  if (t.kind === 'refused') return { ...out, refusal: t.error };
  const problem = runtimeHeaderProblem(attributes, rawHeader(req.rawHeaders, INFERENCE_ID));
  return problem === undefined ? out : { ...out, refusal: new ModelmuxError('invalid_runtime_request', problem) };
}
