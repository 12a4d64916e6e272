import { ModelmuxError } from '../../common/errors.js';
import type { DownstreamRequest, DownstreamResponse } from './downstream.js';

export interface BodyLimits {
  maxBodyBytes: number;
  bodyIdleTimeoutMs: number;
  bodyTimeoutMs: number;
}

/**
 * The client's body, up to `maxBodyBytes`, with no gap between bytes longer than
 * `bodyIdleTimeoutMs` and all of it within `bodyTimeoutMs`, the bounds the exchange reads a
 * proxied body by. For the requests the router answers itself from a whole body: ensembles,
 * sequences and the repository fan-out. `take` is told each chunk's
 * size as it arrives and may throw to refuse it (the router's byte budget): a body sent without
 * Content-Length is counted while it comes, not once it is whole.
 */
export function readBody(limits: BodyLimits, req: DownstreamRequest, res: DownstreamResponse, take: (bytes: number) => void): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const end = (err: Error | undefined): void => {
      if (done) return;
      done = true;
      clearTimeout(total);
      clearTimeout(idle);
      if (err !== undefined) reject(err);
      else resolve(Buffer.concat(chunks, size));
    };
    const total = setTimeout(() => end(new ModelmuxError('request_timeout', `the body did not arrive within ${limits.bodyTimeoutMs} ms`)), limits.bodyTimeoutMs);
    const idle = setTimeout(() => end(new ModelmuxError('request_timeout', `no byte of the body came for ${limits.bodyIdleTimeoutMs} ms`)), limits.bodyIdleTimeoutMs);
    res.on('close', () => end(new Error('the client went away')));
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      idle.refresh();
      size += chunk.length;
      if (size > limits.maxBodyBytes) return end(new ModelmuxError('body_too_large', `the body is larger than the limit of ${limits.maxBodyBytes} bytes`));
      try {
        take(chunk.length);
      } catch (err) {
        return end(err instanceof Error ? err : new Error(String(err)));
      }
      chunks.push(chunk);
    });
    req.on('end', () => end(undefined));
  });
}
