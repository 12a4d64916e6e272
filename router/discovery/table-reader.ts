import { request } from 'undici';
import { parseModelTable, type ModelTable } from '../../common/model-table.js';
import { MAX_TABLE_JSON_BYTES } from '../../common/table-annotation.js';

export interface TableReadOptions {
  /** Deadline of the response head and of each gap in the body. */
  timeoutMs: number;
  /** Bodies longer than this are dropped unread, read as "no valid table". */
  maxBytes?: number;
}

/**
 * Reads a replica's `GET /models`. Rejects when the replica cannot be reached or answers other
 * than 200; resolves undefined when it answered with something that is not a table (garbage,
 * or longer than `maxBytes`, MAX_TABLE_JSON_BYTES by default).
 */
export async function readModelTable(url: string, opts: TableReadOptions): Promise<ModelTable | undefined> {
  const maxBytes = opts.maxBytes ?? MAX_TABLE_JSON_BYTES;
  const res = await request(`${url}/models`, { method: 'GET', headersTimeout: opts.timeoutMs, bodyTimeout: opts.timeoutMs });
  if (res.statusCode !== 200) {
    await res.body.dump();
    throw new Error(`GET /models answered ${res.statusCode}`);
  }
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    length += chunk.length;
    if (length > maxBytes) {
      res.body.destroy();
      return undefined;
    }
    chunks.push(chunk);
  }
  return parseModelTable(Buffer.concat(chunks, length).toString('utf8'));
}
