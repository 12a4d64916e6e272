import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import type ort from 'onnxruntime-node';
import { Tensor } from 'onnxruntime-node';
import { ModelmuxError } from '../../common/errors.js';
import { createSession, modelSession, openModel, type ExecutionProvider, type FedSession, type SessionTuning } from './onnx-runtime.js';
import type { GraphWarmth, ModelSession } from './model-session.js';
import { BufferPool } from '../../common/buffer-pool.js';
import { externalDataFiles } from './external-data.js';
import type { FileMapper } from './file-map.js';
import { splitWeights, type SplitModel, type WeightRef } from './shared-graph.js';
import { singleRowGraph } from './single-row-graph.js';
import { sessionKindFor, type OpenKind } from './session-kind.js';

interface SharedGraph {
  session: Promise<ort.InferenceSession>;
  /** The graph's variant for runs of one row, when it has one and onnxruntime took it. */
  singleRow: Promise<SingleRowSession | undefined>;
  /** Loaded models using it; the sessions are released when the last one is. */
  users: number;
  warmth: GraphWarmth;
}

interface SingleRowSession {
  session: ort.InferenceSession;
  /** Weights fed to it as [1,K] (their files hold [K,1]), with K. */
  transposed: ReadonlyMap<string, number>;
}

export type { OpenKind } from './session-kind.js';

/** A model's own session settings (its config.json), over the pool's. */
export interface SessionOverrides {
  provider?: ExecutionProvider;
  intraOpThreads?: number;
  interOpThreads?: number;
  /** false: a session of its own even when graphs are shared; true: a shared graph even on a GPU whatever its size (session-kind.ts). */
  shareGraph?: boolean;
}
/** How a shared-graph model's weights got into memory: viewed in the mapped file, or read into a buffer. */
export type WeightSource = 'mapped' | 'read';

/**
 * Opens model files into sessions. With `shareGraphs`, a model whose graph another loaded model
 * already has reuses that model's session: its load is reading the file. A model with nothing to
 * share, or a graph onnxruntime will not create with its weights as inputs, gets a session of
 * its own, exactly as without sharing. With a `mapper`, a file whose largest weight lies on a
 * 4-byte boundary (every file the S3 store downloads: aligned-weights.ts) is mapped, not read:
 * its weights are viewed where the page cache holds them (docs/adr/0021-mapped-weights.md).
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
  /**
   * How each mapped file splits: a mappable file is never rewritten, so its split (a few hundred
   * bytes of graph and the weights' places) holds for as long as the path exists, and the next
   * load skips walking the file and hashing the graph (4% of a replica's CPU under uniform traffic).
   */
  private readonly splits = new Map<string, SplitModel | undefined>();

  constructor(
    private readonly provider: ExecutionProvider,
    private readonly tuning: SessionTuning,
    /** `singleRow`: the model's graph has a single-row variant (replica/onnx/single-row-graph.ts). */
    private readonly onOpen: (kind: OpenKind, weights?: WeightSource, singleRow?: boolean) => void = () => undefined,
    private readonly mapper?: FileMapper,
  ) {}

  /** Sessions shared by at least one loaded model. */
  get sharedCount(): number {
    return this.graphs.size;
  }

  /**
   * `model`: the file's path, or its bytes (the host tier's, which are copied, never viewed:
   * the tier keeps them for the next load). `mappable`: nothing will truncate or rewrite the
   * file in place (LocalModelFile.private). `modelBytes`: the model's size, external data
   * included, which decides the kind under CUDA.
   */
  async open(model: string | Uint8Array, mappable = false, overrides: SessionOverrides = {}, modelBytes = 0): Promise<ModelSession> {
    const provider = overrides.provider ?? this.provider;
    const tuning = { ...this.tuning, intraOpThreads: overrides.intraOpThreads ?? this.tuning.intraOpThreads, interOpThreads: overrides.interOpThreads ?? this.tuning.interOpThreads };
    // A shared session has the pool's settings: a model with others gets one of its own.
    const poolSettings = provider === this.provider && tuning.intraOpThreads === this.tuning.intraOpThreads && tuning.interOpThreads === this.tuning.interOpThreads;
    if (!this.tuning.shareGraphs || sessionKindFor(provider, modelBytes, overrides.shareGraph) === 'own_session' || !poolSettings) return this.own(model, provider, tuning);
    return (mappable && typeof model === 'string' ? await this.openMapped(model) : undefined) ?? (await this.openRead(model));
  }

  /** undefined when the file cannot be mapped or is not a shared-graph model with its largest weight aligned: it is read instead. */
  private async openMapped(path: string): Promise<ModelSession | undefined> {
    if (!this.mapper) return undefined;
    const mapper = this.mapper;
    let region: ArrayBuffer;
    try {
      region = mapper.map(path);
    } catch {
      return undefined; // the read gives the error, if there is one
    }
    const bytes = new Uint8Array(region);
    let split: SplitModel | undefined;
    try {
      split = this.splits.has(path) ? this.splits.get(path) : shareable(bytes);
    } catch {
      mapper.unmap(region);
      return undefined; // the read gives the error
    }
    remember(this.splits, path, split);
    if (!split || this.refused.has(split.key) || largest(split.weights).start % 4 !== 0) {
      mapper.unmap(region);
      return undefined;
    }
    let model: ModelSession | undefined;
    try {
      model = await this.shared(split, bytes, () => mapper.unmap(region), 'mapped');
      return model;
    } finally {
      if (!model) mapper.unmap(region);
    }
  }

  private async openRead(path: string | Uint8Array): Promise<ModelSession> {
    const take = (size: number): Buffer => this.buffers.take(size + 3);
    const { file, pooled } = typeof path === 'string' ? readInto(path, take, this.shifts.get(path) ?? 0) : copyInto(path, take);
    let kept = false;
    try {
      const split = shareable(file);
      // A model with external data is opened from its path: onnxruntime finds the files beside it.
      if (!split || this.refused.has(split.key)) return await this.own(externalDataFiles(file).length > 0 ? path : file);
      const bytes = alignLargest(file, pooled, split.weights);
      if (typeof path === 'string') remember(this.shifts, path, bytes.byteOffset - pooled.byteOffset);
      const model = await this.shared(split, bytes, () => this.buffers.give(pooled), 'read');
      if (!model) return await this.own(bytes);
      kept = true;
      return model;
    } finally {
      if (!kept) this.buffers.give(pooled);
    }
  }

  /**
   * The model served by the session of its graph, its weights viewing `bytes` (whose largest
   * weight is 4-byte aligned); `done` runs when the model is released, after its last request.
   * undefined when onnxruntime refuses the graph with weights as inputs: the caller opens a
   * session of its own, and so will every later load of that graph. `done` is then not called.
   */
  private async shared(split: SplitModel, bytes: Uint8Array, done: () => void, source: WeightSource): Promise<ModelSession | undefined> {
    let session: ort.InferenceSession;
    let singleRow: SingleRowSession | undefined;
    let warmth: GraphWarmth;
    try {
      ({ session, singleRow, warmth } = await this.acquire(split));
    } catch (err) {
      if (!(err instanceof ModelmuxError)) throw err;
      this.refused.add(split.key);
      return undefined;
    }
    // Weights off the 4-byte grid are copied into a side buffer from the pool, returned with the model.
    let side: Buffer | undefined;
    const finish = (): void => {
      if (side) this.buffers.give(side);
      done();
    };
    try {
      const weights = weightTensors(bytes, split.weights, (size) => (side = this.buffers.take(size)));
      const model = modelSession(session, () => this.release(split.key).finally(finish), weights, singleRow && fedSingleRow(singleRow, weights));
      this.onOpen('shared_graph', source, singleRow !== undefined);
      return { ...model, kind: 'shared_graph', graph: warmth };
    } catch (err) {
      if (side) this.buffers.give(side);
      await this.release(split.key);
      throw err;
    }
  }

  private async own(model: string | Uint8Array, provider = this.provider, tuning = this.tuning): Promise<ModelSession> {
    const session = await openModel(model, provider, tuning);
    this.onOpen('own_session');
    return { ...session, kind: 'own_session' };
  }

  private async acquire(split: SplitModel): Promise<{ session: ort.InferenceSession; singleRow: SingleRowSession | undefined; warmth: GraphWarmth }> {
    const { key } = split;
    let shared = this.graphs.get(key);
    if (!shared) {
      const session = createSession(split.graph, this.provider, this.tuning);
      const variant = singleRowGraph(split);
      // The variant is only ever faster: a graph onnxruntime will not take that way runs as it came.
      const singleRow = variant
        ? createSession(variant.graph, this.provider, this.tuning).then(
            (s) => ({ session: s, transposed: variant.transposed }),
            () => undefined,
          )
        : Promise.resolve(undefined);
      const created: SharedGraph = { session, singleRow, users: 0, warmth: { warm: false } };
      shared = created;
      this.graphs.set(key, created);
      // A failed creation is forgotten at once, so the next load of that shape tries again or
      // (once refused) opens its own session.
      session.catch(async () => {
        if (this.graphs.get(key) === created) this.graphs.delete(key);
        await (await singleRow)?.session.release();
      });
    }
    shared.users++;
    try {
      return { session: await shared.session, singleRow: await shared.singleRow, warmth: shared.warmth };
    } catch (err) {
      shared.users--;
      throw err;
    }
  }

  private async release(key: string): Promise<void> {
    const shared = this.graphs.get(key);
    if (!shared || --shared.users > 0) return;
    this.graphs.delete(key);
    await Promise.all([shared.session.then((s) => s.release()), shared.singleRow.then((s) => s?.session.release())]);
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

/** Copies a model's bytes into a buffer from `take` (as readInto, a memory copy instead of a read). */
function copyInto(model: Uint8Array, take: (size: number) => Buffer): { pooled: Buffer; file: Uint8Array } {
  const pooled = take(model.length);
  pooled.set(model, 0);
  return { pooled, file: pooled.subarray(0, model.length) };
}

/**
 * The model split for a shared graph, or undefined when it has no weights to move or keeps some
 * in external data files: those stay in the graph, so two models of one shape would hash alike
 * while holding different weights (and onnxruntime refuses a graph made from bytes that names a
 * file: "external data path … escapes working directory").
 */
function shareable(model: Uint8Array): SplitModel | undefined {
  return externalDataFiles(model).length > 0 ? undefined : splitWeights(model);
}

/** Per-path memory of what a file held, bounded: paths are unique per download and not reused. */
function remember<V>(map: Map<string, V>, path: string, value: V): void {
  if (map.size >= 10_000 && !map.has(path)) map.clear();
  map.set(path, value);
}

function largest(weights: readonly WeightRef[]): WeightRef {
  return weights.reduce((a, b) => (b.end - b.start > a.end - a.start ? b : a));
}

/**
 * Moves the file to the one of the first 4 bytes of its buffer where its largest weight starts
 * on a 4-byte boundary: a Float32Array then views it in place instead of copying megabytes.
 * Offsets relative to the returned view are those relative to `file`.
 */
function alignLargest(file: Uint8Array, buffer: Buffer, weights: readonly WeightRef[]): Uint8Array {
  const { start } = largest(weights);
  if ((file.byteOffset + start) % 4 === 0) return file;
  const shift = (4 - ((buffer.byteOffset + start) % 4)) % 4;
  const from = file.byteOffset - buffer.byteOffset;
  buffer.copyWithin(shift, from, from + file.length);
  return buffer.subarray(shift, shift + file.length);
}

/** The single-row session fed the same weight data, the transposed ones declared [1,K]. */
function fedSingleRow(singleRow: SingleRowSession, weights: Readonly<Record<string, Tensor>>): FedSession {
  const fed: Record<string, Tensor> = { ...weights };
  for (const [name, k] of singleRow.transposed) {
    const w = weights[name];
    if (w) fed[name] = new Tensor('float32', w.data as Float32Array, [1, k]);
  }
  return { session: singleRow.session, weights: fed };
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
