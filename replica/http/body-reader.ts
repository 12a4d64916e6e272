import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { ModelmuxError } from '../../common/errors.js';
import { BODY_POOL_BUFFERS, BODY_POOL_BYTES, BufferPool, POOLED_BODY_BYTES } from '../../common/buffer-pool.js';
import { releaseRead } from '../../common/read-release.js';
import { bodyPad, HEADER_INFERENCE_HEADER_LENGTH, TENSOR_ALIGNMENT } from './body-layout.js';

/**
 * Reads an inference request's body straight into one buffer sized by its Content-Length, placed
 * so that its binary tensors can be used in place (body-layout.ts). A body of a chunked request
 * is gathered, then copied in once, as express.raw would. Large buffers come from a pool and go
 * back to it once the request is done with them (`BodyHold`): a fresh buffer of megabytes per
 * request is memory V8 counts as external, and on every few such requests it ran a full
 * mark-compact (docs/adr/0051-replica-request-path.md). A compressed body (Content-Encoding) is
 * left to express.raw, which inflates it.
 */

/** Gives a request's pooled buffer back once both the response is closed and the work that may read it has settled. */
export interface BodyHold {
  /** The work reading the body settled; `reusable` false when it may still read it (it outlived its deadline). */
  settled(reusable: boolean): void;
}

const NO_HOLD: BodyHold = { settled: () => undefined };
const HOLD = Symbol('bodyHold');

/** The hold on the body that `inferenceBody` read for this response; a no-op for any other. */
export function bodyHold(res: Response): BodyHold {
  return (res.locals as { [HOLD]?: BodyHold })[HOLD] ?? NO_HOLD;
}

function tooLarge(max: number): ModelmuxError {
  return new ModelmuxError('body_too_large', `the body is larger than ${max} bytes`);
}

export function inferenceBody(maxBodyBytes: number): RequestHandler {
  const pool = new BufferPool(BODY_POOL_BUFFERS, BODY_POOL_BYTES);
  const inflating = express.raw({ limit: maxBodyBytes, type: () => true });

  /** A buffer with room for `length` bytes at any alignment; pooled when large. */
  const take = (length: number): { buffer: Buffer; pooled: boolean } => {
    const size = length + TENSOR_ALIGNMENT - 1;
    return size >= POOLED_BODY_BYTES ? { buffer: pool.take(size), pooled: true } : { buffer: Buffer.allocUnsafe(size), pooled: false };
  };

  const hold = (res: Response, buffer: Buffer): void => {
    let pending = 2;
    let reusable = true;
    const one = (): void => {
      if (--pending === 0 && reusable) pool.give(buffer);
    };
    res.once('close', one);
    (res.locals as { [HOLD]?: BodyHold })[HOLD] = {
      settled: (r) => {
        reusable &&= r;
        one();
      },
    };
  };

  return (req: Request, res: Response, next: NextFunction): void => {
    const encoding = req.get('content-encoding');
    if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return inflating(req, res, next);
    // llhttp has checked Content-Length: digits only, one value.
    const header = req.get('content-length');
    const declared = header === undefined ? undefined : Number(header);
    if (declared !== undefined && declared > maxBodyBytes) return next(tooLarge(maxBodyBytes));
    const jsonLength = req.get(HEADER_INFERENCE_HEADER_LENGTH);
    const place = (buffer: Buffer, length: number): number => bodyPad(buffer.byteOffset, length, jsonLength === undefined ? undefined : Number(jsonLength));

    const into = declared === undefined ? undefined : take(declared);
    const pad = into === undefined || declared === undefined ? 0 : place(into.buffer, declared);
    const chunks: Buffer[] = [];
    let received = 0;
    let done = false;
    const finish = (err?: ModelmuxError): void => {
      if (done) return;
      done = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      req.off('error', onError);
      if (err) {
        if (into?.pooled) pool.give(into.buffer);
        return next(err);
      }
      const { buffer, pooled } = into ?? take(received);
      let start = pad;
      if (into === undefined) {
        start = place(buffer, received);
        let at = start;
        for (const c of chunks) at += c.copy(buffer, at);
      }
      if (pooled) hold(res, buffer);
      req.body = buffer.subarray(start, start + received);
      next();
    };
    const onData = (chunk: Buffer): void => {
      if (received + chunk.length > (declared ?? maxBodyBytes)) {
        finish(declared === undefined ? tooLarge(maxBodyBytes) : new ModelmuxError('invalid_request', 'the body is longer than its Content-Length'));
        return;
      }
      const at = received;
      received += chunk.length;
      if (into === undefined) return void chunks.push(chunk);
      chunk.copy(into.buffer, pad + at);
      releaseRead(chunk);
    };
    const onEnd = (): void => finish(declared !== undefined && received !== declared ? new ModelmuxError('invalid_request', 'the body is shorter than its Content-Length') : undefined);
    const onClose = (): void => finish(new ModelmuxError('invalid_request', 'the client closed the request before its body ended'));
    const onError = (): void => finish(new ModelmuxError('invalid_request', 'the request body could not be read'));
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('close', onClose);
    req.once('error', onError);
  };
}
