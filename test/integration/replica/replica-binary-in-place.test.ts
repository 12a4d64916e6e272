import { expect, jest } from '@jest/globals';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { identityModel, pairModel, writeModel } from '../../helpers/datatype-models.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';

jest.setTimeout(60_000);

/**
 * The replica reads a binary request into one buffer and runs the tensors as views on it where
 * their offsets allow (replica/http/body-reader.ts, docs/adr/0051-replica-request-path.md): these
 * are the requests where they do not, and the reuse of those buffers from request to request.
 */

interface Answer {
  status: number;
  json: Record<string, unknown>;
  binary: Buffer;
}

function split(all: Buffer, header: string | null): { json: Record<string, unknown>; binary: Buffer } {
  const length = Number(header ?? all.length);
  return { json: JSON.parse(all.subarray(0, length).toString()) as Record<string, unknown>, binary: all.subarray(length) };
}

/** A binary request; `chunked` sends the body as a stream of 10 000-byte pieces, with no Content-Length. */
async function inferBinary(url: string, header: unknown, data: Buffer, chunked = false): Promise<Answer> {
  const head = Buffer.from(JSON.stringify(header));
  const body = Buffer.concat([head, data]);
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      for (let at = 0; at < body.length; at += 10_000) c.enqueue(body.subarray(at, at + 10_000));
      c.close();
    },
  });
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(head.length) },
    ...(chunked ? { body: stream, duplex: 'half' } : { body }),
  });
  const all = Buffer.from(await res.arrayBuffer());
  return { status: res.status, ...split(all, res.headers.get('inference-header-content-length')) };
}

const bytesOf = (view: ArrayBufferView): Buffer => Buffer.from(view.buffer, view.byteOffset, view.byteLength);

let dir: string;
let r: ReplicaProcess;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'modelmux-in-place-'));
  writeModel(dir, 'identity-float64', identityModel('float64'));
  writeModel(dir, 'identity-float32', identityModel('float32'));
  writeModel(dir, 'identity-bool', identityModel('bool'));
  writeModel(dir, 'pair-uint8-float64', pairModel('uint8', 'float64'));
  r = await startReplica({ args: ['--model-source', pathToFileURL(dir).href], env: {} });
});

afterAll(async () => {
  await r?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('a binary tensor', () => {
  it('answers FP64 exactly whatever the length of the JSON before it, odd lengths included', async () => {
    const values = bytesOf(Float64Array.from([0.1, -1e300, 5e-324]));
    for (let k = 0; k < 8; k++) {
      const a = await inferBinary(
        `${r.url}/v2/models/identity-float64/infer`,
        { id: 'x'.repeat(k), inputs: [{ name: 'x', datatype: 'FP64', shape: [1, 3], parameters: { binary_data_size: 24 } }], parameters: { binary_data_output: true } },
        values,
      );
      expect(a.status).toBe(200);
      expect(a.json['id']).toBe('x'.repeat(k));
      expect(a.binary.equals(values)).toBe(true);
    }
  });

  it('answers FP64 that follows a 3-byte tensor, at an offset no 8-byte element starts on, exactly', async () => {
    const a = Buffer.from([0, 7, 255]);
    const b = bytesOf(Float64Array.from([1.5, -0, Infinity]));
    const answer = await inferBinary(
      `${r.url}/v2/models/pair-uint8-float64/infer`,
      {
        inputs: [
          { name: 'a', datatype: 'UINT8', shape: [1, 3], parameters: { binary_data_size: 3 } },
          { name: 'b', datatype: 'FP64', shape: [1, 3], parameters: { binary_data_size: 24 } },
        ],
        parameters: { binary_data_output: true },
      },
      Buffer.concat([a, b]),
    );
    expect(answer.status).toBe(200);
    expect(answer.json['outputs']).toEqual([
      { name: 'ya', datatype: 'UINT8', shape: [1, 3], parameters: { binary_data_size: 3 } },
      { name: 'yb', datatype: 'FP64', shape: [1, 3], parameters: { binary_data_size: 24 } },
    ]);
    expect(answer.binary.equals(Buffer.concat([a, b]))).toBe(true);
  });

  it('answers BOOL bytes other than 0 and 1 as true', async () => {
    const a = await inferBinary(
      `${r.url}/v2/models/identity-bool/infer`,
      { inputs: [{ name: 'x', datatype: 'BOOL', shape: [1, 3], parameters: { binary_data_size: 3 } }], parameters: { binary_data_output: true } },
      Buffer.from([2, 0, 255]),
    );
    expect(a.status).toBe(200);
    expect([...a.binary]).toEqual([1, 0, 1]);
  });
});

describe('a body without a Content-Length', () => {
  it('is refused with 413 body_too_large once it grows past --max-body-bytes (8Mi)', async () => {
    const a = await inferBinary(
      `${r.url}/v2/models/identity-float32/infer`,
      { inputs: [{ name: 'x', datatype: 'FP32', shape: [750_000, 3], parameters: { binary_data_size: 9_000_000 } }] },
      Buffer.alloc(9_000_000),
      true,
    );
    expect(a.status).toBe(413);
    expect(a.json['error']).toBe('body_too_large');
  });
});

describe('request buffers, reused', () => {
  /** Rows of three float32s, different for every `seed`. */
  const tensor = (seed: number, rows: number): Buffer => bytesOf(Float32Array.from({ length: rows * 3 }, (_, i) => seed * 1e6 + i));

  it('answers each of many concurrent large requests with its own tensor, round after round, chunked or not', async () => {
    const rows = 20_000;
    for (let round = 0; round < 4; round++) {
      const seeds = Array.from({ length: 8 }, (_, k) => round * 8 + k);
      const answers = await Promise.all(
        seeds.map((seed) =>
          inferBinary(
            `${r.url}/v2/models/identity-float32/infer`,
            { inputs: [{ name: 'x', datatype: 'FP32', shape: [rows, 3], parameters: { binary_data_size: rows * 12 } }], parameters: { binary_data_output: true } },
            tensor(seed, rows),
            seed % 2 === 1,
          ),
        ),
      );
      answers.forEach((a, k) => {
        expect(a.status).toBe(200);
        expect(a.binary.equals(tensor(seeds[k]!, rows))).toBe(true);
      });
    }
  });
});
