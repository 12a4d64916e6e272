import { mkdir, rename, stat, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { parseModelId } from '../common/model-id.js';
import { tarGz } from '../common/tar-gz.js';
import { hiddenUnitsForBytes, wineModelBytes } from '../common/wine-model.js';

/**
 * Writes the deterministic example models (common/wine-model.ts) where a replica's model store
 * reads them: model `ID` at `<root>/<ID>/model.onnx`, in a folder or an S3 bucket; or, as the
 * SageMaker multi-model article lays its store out, copies of one `model.tar.gz` at `<root>/<ID>.tar.gz`.
 */

export type ModelDestination = { kind: 'file'; dir: string } | { kind: 's3'; bucket: string; prefix: string };

/** S3 client settings; credentials come from the AWS SDK's usual chain (AWS_ACCESS_KEY_ID, …). */
export interface S3Settings {
  endpoint?: string;
  region: string;
  /** Path-style addressing; defaults to true when an endpoint is set, as most S3-compatible servers need. */
  forcePathStyle?: boolean;
}

export interface ExampleModelSet {
  /** Ids are `<prefix><n>` for n in [0, count). */
  prefix: string;
  count: number;
  /** Approximate size of each model file; undefined gives the small default (about 1 KB). */
  bytesPerModel?: number;
  /**
   * Copies of one archive holding model `<prefix>0` as its model.onnx, at `<prefix><n>.tar.gz`
   * (the models `<prefix><n>.tar.gz`), rather than a model folder per id.
   */
  archives?: boolean;
}

export interface WriteReport {
  written: string[];
  /** Already present with the expected size: deterministic bytes, so nothing to redo. */
  skipped: string[];
}

/** `s3://bucket/prefix`, `file:///dir` or a plain path (relative to `cwd`). */
export function parseDestination(raw: string, cwd: string): ModelDestination | { error: string } {
  if (raw.startsWith('s3://')) {
    const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(raw);
    if (!m) return { error: `"${raw}" is not s3://bucket[/prefix] (bucket: 3-63 lowercase letters, digits, dots, hyphens)` };
    return { kind: 's3', bucket: m[1] ?? '', prefix: (m[2] ?? '').replace(/\/+$/, '') };
  }
  if (raw.startsWith('file://')) {
    try {
      return { kind: 'file', dir: fileURLToPath(raw) };
    } catch {
      return { error: `"${raw}" is not a file:///absolute/dir URI` };
    }
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(raw)) return { error: `"${raw}": only s3:// and file:// destinations are supported` };
  return { kind: 'file', dir: resolve(cwd, raw) };
}

export function exampleModelIds(set: ExampleModelSet): string[] {
  const ids = Array.from({ length: set.count }, (_, n) => `${set.prefix}${n}`);
  for (const id of ids) {
    const check = parseModelId(id);
    if (!check.ok) throw new Error(`example model id "${id}" is invalid: ${check.reason}`);
  }
  return ids;
}

export function createS3Client(s3: S3Settings): S3Client {
  return new S3Client({
    region: s3.region,
    ...(s3.endpoint !== undefined ? { endpoint: s3.endpoint } : {}),
    forcePathStyle: s3.forcePathStyle ?? s3.endpoint !== undefined,
  });
}

/** Where model `id` goes below the destination's root: its folder's model.onnx, or the archive object itself. */
export function modelPath(id: string, archive: boolean): string {
  return archive ? id : `${id}/model.onnx`;
}

function objectKey(prefix: string, path: string): string {
  return prefix === '' ? path : `${prefix}/${path}`;
}

async function fileSize(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).size;
  } catch {
    return undefined;
  }
}

async function writeToFolder(dir: string, rel: string, bytes: Uint8Array): Promise<boolean> {
  const path = join(dir, ...rel.split('/'));
  if ((await fileSize(path)) === bytes.byteLength) return false;
  await mkdir(dirname(path), { recursive: true });
  // A replica may read the folder while we write: it sees the old file or the whole new one.
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, bytes);
  await rename(tmp, path);
  return true;
}

async function objectSize(client: S3Client, bucket: string, key: string): Promise<number | undefined> {
  try {
    return (await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }))).ContentLength;
  } catch (err) {
    const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    if (status === 404) return undefined;
    throw err;
  }
}

async function writeToBucket(client: S3Client, bucket: string, key: string, bytes: Uint8Array): Promise<boolean> {
  if ((await objectSize(client, bucket, key)) === bytes.byteLength) return false;
  await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: bytes, ContentType: 'application/octet-stream' }));
  return true;
}

interface DestinationWriter {
  /** Writes `bytes` at path `rel` below the root; resolves false when they were already there. */
  write(rel: string, bytes: Uint8Array): Promise<boolean>;
  close(): void;
}

function destinationWriter(dest: ModelDestination, s3: S3Settings): DestinationWriter {
  if (dest.kind === 'file') return { write: (rel, bytes) => writeToFolder(dest.dir, rel, bytes), close: () => undefined };
  const client = createS3Client(s3);
  return { write: (rel, bytes) => writeToBucket(client, dest.bucket, objectKey(dest.prefix, rel), bytes), close: () => client.destroy() };
}

/**
 * Writes every model of `set` that is missing (or has another size) at `dest`. Models are
 * generated one at a time so a large `bytesPerModel` does not hold them all in memory.
 */
export async function writeExampleModels(dest: ModelDestination, set: ExampleModelSet, s3: S3Settings): Promise<WriteReport> {
  const hidden = hiddenUnitsForBytes(set.bytesPerModel);
  const report: WriteReport = { written: [], skipped: [] };
  const writer = destinationWriter(dest, s3);
  const archive = set.archives === true ? await tarGz([{ name: 'model.onnx', body: wineModelBytes(`${set.prefix}0`, hidden) }]) : undefined;
  try {
    for (const id of exampleModelIds(set)) {
      const written = archive !== undefined ? await writer.write(modelPath(`${id}.tar.gz`, true), archive) : await writer.write(modelPath(id, false), wineModelBytes(id, hidden));
      (written ? report.written : report.skipped).push(archive !== undefined ? `${id}.tar.gz` : id);
    }
  } finally {
    writer.close();
  }
  return report;
}
