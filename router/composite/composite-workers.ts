import { Worker } from 'node:worker_threads';
import { ERROR_CATALOGUE, ModelmuxError, type ErrorCode } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { CompositeCodec } from './composite-codec.js';
import type { WrittenAnswer } from './composite-body.js';

type Methods = Pick<CompositeCodec, 'request' | 'answer' | 'combine' | 'step' | 'last' | 'drop'>;
export type CodecMethod = keyof Methods;

/** One call of the codec, as it crosses to a worker thread. */
export interface CodecTask<M extends CodecMethod = CodecMethod> {
  id: number;
  method: M;
  args: Parameters<Methods[M]>;
}

/** What a codec method returns: bytes, an answer written, or nothing. */
type CodecValue = Uint8Array | WrittenAnswer | undefined;

/** Its outcome: the value, or the error as its code (a catalogue code, or none for a plain Error) and message. */
export type CodecReply = { id: number; ok: true; value: CodecValue } | { id: number; ok: false; code: ErrorCode | undefined; message: string };

/** A codec method's arguments after the key. */
type ArgsOf<M extends CodecMethod> = Parameters<Methods[M]> extends [number, ...infer Rest] ? Rest : never;

/** Where one composite request's tensor work runs, under its own key: a worker thread, or (0 workers) the event loop itself. */
export interface CodecPort {
  /** `codec[method](key, ...args)`; rejects with its ModelmuxError, or an Error with its message. */
  call<M extends CodecMethod>(method: M, ...args: ArgsOf<M>): Promise<ReturnType<Methods[M]>>;
}

/** Runs one task on `codec`: the reply, and the buffers it hands over (its own, whole). */
export function runTask(codec: CompositeCodec, task: CodecTask): { reply: CodecReply; transfer: ArrayBuffer[] } {
  try {
    const value = (codec[task.method] as (...args: unknown[]) => CodecValue).apply(codec, task.args);
    return { reply: { id: task.id, ok: true, value }, transfer: value === undefined ? [] : owned(value instanceof Uint8Array ? value : value.bytes) };
  } catch (err) {
    return { reply: { id: task.id, ok: false, ...errorParts(err) }, transfer: [] };
  }
}

function errorParts(err: unknown): { code: ErrorCode | undefined; message: string } {
  if (err instanceof ModelmuxError) return { code: err.code, message: err.message };
  return { code: undefined, message: err instanceof Error ? err.message : String(err) };
}

function toError(code: ErrorCode | undefined, message: string): Error {
  return code !== undefined && code in ERROR_CATALOGUE ? new ModelmuxError(code, message) : new Error(message);
}

/** The ArrayBuffer of `bytes` when they are all of it: only then may it be handed over (a Buffer may be a slice of a shared pool). */
function owned(bytes: Uint8Array): ArrayBuffer[] {
  const b = bytes.buffer;
  return b instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === b.byteLength ? [b] : [];
}

interface Pending {
  resolve(value: CodecValue): void;
  reject(err: Error): void;
}

/**
 * One worker thread running a CompositeCodec (composite-worker.ts), started at its first call
 * and again after it dies (the calls it had then fail). Calls are answered in the order they
 * were made. Bodies go over as copies of their bytes, results come back without a copy. The
 * thread never keeps the router alive.
 */
class CodecThread {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;

  constructor(private readonly log: Logger) {}

  call(method: CodecMethod, args: readonly unknown[]): Promise<CodecValue> {
    const worker = (this.worker ??= this.start());
    const id = this.nextId++;
    const transfer: ArrayBuffer[] = [];
    const copied = args.map((a) => {
      if (!(a instanceof Uint8Array)) return a;
      const copy = new Uint8Array(a);
      transfer.push(copy.buffer);
      return copy;
    });
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, method, args: copied }, transfer);
    });
  }

  private start(): Worker {
    const worker = new Worker(new URL('./composite-worker.js', import.meta.url));
    worker.unref();
    worker.on('message', (reply: CodecReply) => {
      const p = this.pending.get(reply.id);
      if (p === undefined) return;
      this.pending.delete(reply.id);
      if (reply.ok) p.resolve(reply.value);
      else p.reject(toError(reply.code, reply.message));
    });
    worker.on('error', (err: Error) => this.log.error('composite worker failed', { reason: err.message }));
    worker.on('exit', (code) => {
      if (this.worker === worker) this.worker = undefined;
      const lost = [...this.pending.values()];
      this.pending.clear();
      for (const p of lost) p.reject(new ModelmuxError('internal', `the composite worker thread stopped (exit code ${code})`));
    });
    return worker;
  }
}

/**
 * `count` worker threads for composite requests (`--composite-workers`). A composite request's
 * codec state lives in one thread, so each port the pool gives is bound to one thread, in turn,
 * and to a key of its own. With no thread, the codec runs on the event loop, each result a turn
 * later as a worker's would come.
 */
export class CompositeWorkers {
  private readonly threads: CodecThread[];
  private inline: CompositeCodec | undefined;
  private nextKey = 0;

  constructor(count: number, log: Logger) {
    this.threads = Array.from({ length: count }, () => new CodecThread(log));
  }

  /** A port for one composite request. */
  port(): CodecPort {
    const key = this.nextKey++;
    const thread = this.threads[key % this.threads.length];
    if (thread !== undefined) return { call: <M extends CodecMethod>(method: M, ...args: ArgsOf<M>) => thread.call(method, [key, ...args]) as Promise<ReturnType<Methods[M]>> };
    const codec = (this.inline ??= new CompositeCodec());
    return {
      call: <M extends CodecMethod>(method: M, ...args: ArgsOf<M>) => Promise.resolve().then(() => (codec[method] as (...a: unknown[]) => ReturnType<Methods[M]>).apply(codec, [key, ...args])),
    };
  }
}
