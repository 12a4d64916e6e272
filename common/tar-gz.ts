import { gzipSync } from 'node:zlib';
import { pack, type Header } from 'tar-stream';

/**
 * Writes model archives (`model.tar.gz`, SageMaker's artifact format) with tar-stream, the parser
 * the replica reads them with: `modelmux models --archives` and the tests' hostile archives.
 */

/** Entries are dated at the epoch, so the same entries make the same bytes. */
const EPOCH = new Date(0);

/** One entry: a regular file with `body`, or any other header (links, devices, names a test makes hostile). */
export type TarEntry = { name: string; body: string | Uint8Array } | (Partial<Header> & { name: string; body?: undefined });

/** The tar of `entries`, as tar-stream writes it (ustar, pax headers for long names). */
export async function tarBytes(entries: readonly TarEntry[]): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  const done = new Promise<Buffer>((resolve, reject) => {
    p.on('data', (c: unknown) => chunks.push(c as Buffer));
    p.on('end', () => resolve(Buffer.concat(chunks)));
    p.on('error', reject);
  });
  for (const e of entries) {
    if (e.body !== undefined) p.entry({ name: e.name, mtime: EPOCH }, e.body);
    else p.entry({ type: 'file', size: 0, mtime: EPOCH, ...e });
  }
  p.finalize();
  return done;
}

/** The gzip-compressed tar of `entries`: a model.tar.gz. */
export async function tarGz(entries: readonly TarEntry[]): Promise<Buffer> {
  return gzipSync(await tarBytes(entries));
}
