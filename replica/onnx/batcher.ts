import type { Clock } from '../../common/clock.js';
import { ModelmuxError } from '../../common/errors.js';
import { BatchQueue, type Batch } from './batch-policy.js';
import type { InferRequest, OutputTensor } from '../../common/inference-body.js';
import type { ModelSession } from './model-session.js';
import { concatDim0, splitDim0 } from '../../common/tensor.js';

interface Job {
  session: ModelSession;
  req: InferRequest;
  rows: number;
  resolve(out: OutputTensor[]): void;
  reject(err: unknown): void;
}

/**
 * Runs inference through per-model dynamic batches (the timing side of batch-policy.ts).
 * Requests are stacked on dim 0 only when the model says its rows are independent (its
 * `batching`, from its config.json) and its dim 0 is dynamic; each request gets back exactly its
 * own rows of every output. A model whose rows interact would answer wrong, so none is batched
 * by default.
 */
export class Batcher {
  private readonly queue = new BatchQueue<Job>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt: number | undefined;
  /**
   * A number per session: requests of one model id may hold two versions of it while a new one
   * is swapped in (ModelCache.swap), and a batch runs on one session, so they must not share one.
   */
  private readonly sessionNumbers = new WeakMap<ModelSession, number>();
  private sessionsSeen = 0;

  constructor(
    private readonly clock: Clock,
    private readonly observeBatch: (requests: number) => void,
  ) {}

  run(modelId: string, session: ModelSession, req: InferRequest): Promise<OutputTensor[]> {
    // An empty request runs alone: stacked with others it could only make their run fail.
    const batching = session.batching;
    if (batching === undefined || batching.maxBatchSize <= 1 || !session.batchable || req.rows === undefined || req.rows === 0) {
      this.observeBatch(1);
      return session.run(req.inputs);
    }
    let n = this.sessionNumbers.get(session);
    if (n === undefined) this.sessionNumbers.set(session, (n = ++this.sessionsSeen));
    const key = `${modelId}\u0000${n}\u0000${req.inputs.map((t) => `${t.datatype}:${t.dims.slice(1).join('x')}`).join('|')}`;
    return new Promise<OutputTensor[]>((resolve, reject) => {
      const rows = req.rows ?? 0;
      const ready = this.queue.add(key, { session, req, rows, resolve, reject }, this.clock.now(), batching);
      if (ready) void this.execute(ready);
      else this.arm();
    });
  }

  private arm(): void {
    const at = this.queue.nextDeadline();
    if (at === undefined) return;
    if (this.timer && this.timerAt !== undefined && this.timerAt <= at) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.timerAt = undefined;
        for (const b of this.queue.takeDue(this.clock.now())) void this.execute(b);
        this.arm();
      },
      Math.max(0, at - this.clock.now()),
    );
  }

  private async execute(batch: Batch<Job>): Promise<void> {
    const jobs = batch.items;
    const first = jobs[0];
    if (!first) return;
    this.observeBatch(jobs.length);
    try {
      const inputs = first.req.inputs.map((_, i) => concatDim0(jobs.map((j) => j.req.inputs[i] ?? first.req.inputs[i]!)));
      const outputs = await first.session.run(inputs);
      const rows = jobs.map((j) => j.rows);
      const total = rows.reduce((a, b) => a + b, 0);
      const pieces = outputs.map((o) => {
        if (o.dims[0] !== total) throw new ModelmuxError('inference_failed', `output "${o.name}" has ${o.dims[0]} rows for ${total} input rows; cannot split the batch`);
        return splitDim0(o, rows).map((t) => ({ ...t, name: o.name }));
      });
      jobs.forEach((j, k) => j.resolve(pieces.map((p) => p[k]!)));
    } catch (err) {
      for (const j of jobs) j.reject(err);
    }
  }
}
