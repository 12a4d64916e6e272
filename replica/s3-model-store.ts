import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { ModelmuxError } from '../common/errors.js';
import type { ModelId } from '../common/model-id.js';
import { MODEL_FILE, modelKey, type LocalModelFile, type ModelStore } from './model-store.js';

export interface S3StoreOptions {
  uri: string;
  endpoint?: string;
  region: string;
  forcePathStyle?: boolean;
  /** Downloads land here: `<cacheDir>/<ID>/model.onnx`, written to a temp name and renamed. */
  cacheDir: string;
  maxFileBytes?: number;
}

const NOT_FOUND = new Set(['NoSuchKey', 'NotFound']);

/**
 * `s3://bucket/prefix` on AWS or any S3-compatible endpoint. Credentials come from the standard
 * AWS chain (env, shared files, web identity, instance metadata) and never reach a log line.
 */
export class S3ModelStore implements ModelStore {
  readonly uri: string;
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(private readonly opts: S3StoreOptions) {
    this.uri = opts.uri;
    const u = new URL(opts.uri);
    this.bucket = u.hostname;
    this.prefix = decodeURIComponent(u.pathname);
    this.client = new S3Client({
      region: opts.region,
      ...(opts.endpoint !== undefined ? { endpoint: opts.endpoint } : {}),
      forcePathStyle: opts.forcePathStyle ?? opts.endpoint !== undefined,
      // Fail over to 503 quickly when the store is down rather than hold requests for long.
      maxAttempts: 2,
      requestHandler: { connectionTimeout: 3000, requestTimeout: 120_000 },
    });
  }

  async fetch(id: ModelId): Promise<LocalModelFile> {
    const key = modelKey(this.prefix, id);
    let body: Readable;
    let length: number | undefined;
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      if (!(out.Body instanceof Readable)) throw new Error('the S3 response has no body stream');
      body = out.Body;
      length = out.ContentLength;
    } catch (err) {
      throw this.translate(err, id);
    }
    const max = this.opts.maxFileBytes;
    if (max !== undefined && length !== undefined && length > max) {
      body.destroy();
      throw new ModelmuxError('model_too_large', `model "${id}" weighs ${length} bytes, more than the ${max} allowed`);
    }
    const dir = join(this.opts.cacheDir, id);
    const path = join(dir, MODEL_FILE);
    const tmp = join(dir, `.${MODEL_FILE}.${randomBytes(6).toString('hex')}.tmp`);
    let bytes = 0;
    const limit = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        bytes += chunk.length;
        if (max !== undefined && bytes > max) cb(new ModelmuxError('model_too_large', `model "${id}" is larger than the ${max} bytes allowed`));
        else cb(null, chunk);
      },
    });
    try {
      await mkdir(dir, { recursive: true });
      await pipeline(body, limit, createWriteStream(tmp, { mode: 0o600 }));
      await rename(tmp, path);
    } catch (err) {
      await rm(tmp, { force: true });
      if (err instanceof ModelmuxError) throw err;
      throw new ModelmuxError('store_unavailable', `download of "${id}" from ${this.uri} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    return { path, bytes, discard: () => rm(path, { force: true }) };
  }

  destroy(): void {
    this.client.destroy();
  }

  private translate(err: unknown, id: ModelId): ModelmuxError {
    const name = err instanceof Error ? err.name : '';
    const status = err instanceof S3ServiceException ? err.$metadata.httpStatusCode : undefined;
    if (name !== 'NoSuchBucket' && (NOT_FOUND.has(name) || status === 404)) return new ModelmuxError('model_not_found', `no model "${id}" in ${this.uri}`);
    const what = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    return new ModelmuxError('store_unavailable', `model store ${this.uri} unavailable: ${what}`, { cause: err });
  }
}
