import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import type ort from 'onnxruntime-node';
import { Tensor } from 'onnxruntime-node';
import { ModelmuxError } from '../common/errors.js';
import { createSession, modelSession, openModel, type ExecutionProvider, type ModelSession, type SessionTuning } from './onnx-runtime.js';
import { BufferPool } from './buffer-pool.js';
import { splitWeights, type WeightRef } from './shared-graph.js';

interface SharedGraph {
  session: Promise<ort.InferenceSession>;
  /** Loaded models using it; the session is released when the last one is. */
  users: number;
}

export type OpenKind = 'shared_graph' | 'own_session';

/**
 * Opens model files into sessions. With `shareGraphs`, a model whose graph another loaded model
 * already has reuses that model's session: its load is reading the file. A model with nothing to
 * share, or a graph onnxruntime will not create with its weights as inputs, gets a session of
 * its own, exactly as without sharing.
 */
export class GraphSessions {
  private readonly graphs = new Map<string, SharedGraph>();
  /** Graphs onnxruntime refused with weights as inputs: their models get sessions of their own. */
  private readonly refused = new Set<string>();
  // Room for the bursts of releases of a busy replica: with 8, the frequency policy's short-lived
  // models overflowed it and every overflow came back as allocations and garbage collections.
  private readonly buffers = new BufferPool(32, 256 * 1024 ** 2);
  /**
   * Where in its buffer each file was last read so its largest weight came out aligned: the
   * next read of the same file lands there directly instead of moving megabytes after the read.
   * Paths are unique per download, so a stale entry only costs that move once.
   */
  private readonly shifts = new Map<string, number>();

  constructor(
    private readonly provider: ExecutionProvider,
    private readonly tuning: SessionTuning,
    private readonly onOpen: (kind: OpenKind) => void = () => undefined,
  ) {}

  /** Sessions shared by at least one loaded model. */
  get sharedCount(): number {
    return this.graphs.size;
  }

  async open(path: string): Promise<ModelSession> {
    if (!this.tuning.shareGraphs) return this.own(path);
    // The buffers a shared-graph model's weights live in go back to the pool with the model.
    const held: Buffer[] = [];
    const take = (size: number): Buffer => {
      const b = this.buffers.take(size);
      held.push(b);
      return b;
    };
    const giveBack = (): void => {
      for (const b of held.splice(0)) this.buffers.give(b);
    };
    let kept = false;
    try {
      const { file, pooled } = readInto(path, (size) => take(size + 3), this.shifts.get(path) ?? 0);
      const split = splitWeights(file);
      if (!split || this.refused.has(split.key)) return await this.own(file);
      const bytes = alignLargest(file, pooled, split.weights);
      this.rememberShift(path, bytes.byteOffset - pooled.byteOffset);
      let session: ort.InferenceSession;
      try {
        session = await this.acquire(split.key, split.graph);
      } catch (err) {
        if (!(err instanceof ModelmuxError)) throw err;
        this.refused.add(split.key);
        return await this.own(bytes);
      }
      try {
        const model = modelSession(session, () => this.release(split.key).finally(giveBack), weightTensors(bytes, split.weights, take));
        kept = true;
        this.onOpen('shared_graph');
        return model;
      } catch (err) {
        await this.release(split.key);
        throw err;
      }
    } finally {
      if (!kept) giveBack();
    }
  }

  private rememberShift(path: string, shift: number): void {
    if (this.shifts.size >= 10_000 && !this.shifts.has(path)) this.shifts.clear();
    this.shifts.set(path, shift);
  }

  private async own(model: string | Uint8Array): Promise<ModelSession> {
    const session = await openModel(model, this.provider, this.tuning);
    this.onOpen('own_session');
    return session;
  }

  private acquire(key: string, graph: Uint8Array): Promise<ort.InferenceSession> {
    let shared = this.graphs.get(key);
    if (!shared) {
      const session = createSession(graph, this.provider, this.tuning);
      shared = { session, users: 0 };
      this.graphs.set(key, shared);
      // A failed creation is forgotten at once, so the next load of that shape tries again or
      // (once refused) opens its own session.
      session.catch(() => {
        if (this.graphs.get(key) === shared) this.graphs.delete(key);
      });
    }
    shared.users++;
    const users = shared;
    return shared.session.catch((err: unknown) => {
      users.users--;
      throw err;
    });
  }

  private async release(key: string): Promise<void> {
    const shared = this.graphs.get(key);
    if (!shared || --shared.users > 0) return;
    this.graphs.delete(key);
    await (await shared.session).release();
  }
}

/**
 * Reads a whole file into a buffer from `take` (at least 3 bytes longer, room for alignLargest),
 * starting `shift` bytes (0–3) into it.
 * Synchronously: the file is in the page cache (just downloaded or in the disk tier), so this is
 * a memory copy of about a millisecond for 5 MB, where four hops through the thread pool would
 * each wait a full turn of a busy event loop (docs/adr/0016-shared-graph-sessions.md).
 */
function readInto(path: string, take: (size: number) => Buffer, shift: number): { pooled: Buffer; file: Uint8Array } {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    const pooled = take(size);
    let read = 0;
    while (read < size) {
      const n = readSync(fd, pooled, shift + read, size - read, read);
      if (n === 0) break;
      read += n;
    }
    if (read !== size) throw new ModelmuxError('model_load_failed', `the model file shrank while it was read (${read} of ${size} bytes)`);
    return { pooled, file: pooled.subarray(shift, shift + size) };
  } finally {
    closeSync(fd);
  }
}

/**
 * Moves the file to the one of the first 4 bytes of its buffer where its largest weight starts
 * on a 4-byte boundary: a Float32Array then views it in place instead of copying megabytes.
 * Offsets relative to the returned view are those relative to `file`.
 */
function alignLargest(file: Uint8Array, buffer: Buffer, weights: readonly WeightRef[]): Uint8Array {
  const largest = weights.reduce((a, b) => (b.end - b.start > a.end - a.start ? b : a));
  if ((file.byteOffset + largest.start) % 4 === 0) return file;
  const shift = (4 - ((buffer.byteOffset + largest.start) % 4)) % 4;
  const from = file.byteOffset - buffer.byteOffset;
  buffer.copyWithin(shift, from, from + file.length);
  return buffer.subarray(shift, shift + file.length);
}

/**
 * The weights as tensors viewing `bytes`. Weights that do not start on a 4-byte boundary (all
 * but the largest, often) are copied into one buffer from `take`, each at an aligned offset.
 */
function weightTensors(bytes: Uint8Array, weights: readonly WeightRef[], take: (size: number) => Buffer): Record<string, Tensor> {
  const aligned = (w: WeightRef): boolean => (bytes.byteOffset + w.start) % 4 === 0;
  const copied = weights.filter((w) => !aligned(w));
  const side = copied.length > 0 ? take(copied.reduce((n, w) => n + (w.end - w.start), 0)) : undefined;
  let sideOffset = 0;
  const feeds: Record<string, Tensor> = {};
  for (const w of weights) {
    const length = w.end - w.start;
    let data: Float32Array;
    if (aligned(w)) data = new Float32Array(bytes.buffer, bytes.byteOffset + w.start, length / 4);
    else {
      const into = side as Buffer;
      into.set(bytes.subarray(w.start, w.end), sideOffset);
      data = new Float32Array(into.buffer, into.byteOffset + sideOffset, length / 4);
      sideOffset += length;
    }
    feeds[w.name] = new Tensor('float32', data, w.dims);
  }
  return feeds;
}
