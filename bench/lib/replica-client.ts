import { WINE_FEATURES, WINE_INPUT } from '../../common/wine-model.js';
import type { Child } from './child.js';
import { ROWS } from './gpu-check-models.js';
import { snapshot, type Snapshot } from './replica-snapshot.js';

/** The GPU check's view of the replica process it started: its model repository API, inference and /metrics, each request timed. */
export class Replica {
  readonly base: string;
  constructor(readonly child: Child) {
    this.base = `http://127.0.0.1:${child.ready[1]}`;
  }

  async post(path: string, body?: unknown): Promise<{ ms: number; json: unknown }> {
    const t = performance.now();
    const res = await fetch(`${this.base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body ?? {}),
      signal: AbortSignal.timeout(120_000),
    });
    const text = await res.text();
    const ms = performance.now() - t;
    if (res.status !== 200) throw new Error(`replica answered ${res.status} to ${path}: ${text.slice(0, 400)}\n${this.child.output().slice(-2000)}`);
    return { ms, json: JSON.parse(text) as unknown };
  }

  async infer(id: string, input: Float32Array): Promise<{ ms: number; answer: number[] }> {
    const { ms, json } = await this.post(`/v2/models/${id}/infer`, { inputs: [{ name: WINE_INPUT, shape: [ROWS, WINE_FEATURES], datatype: 'FP32', data: Array.from(input) }] });
    const out = (json as { outputs?: { data?: number[] }[] }).outputs?.[0]?.data;
    if (!Array.isArray(out) || out.length !== ROWS) throw new Error(`replica answered ${id} without ${ROWS} rows: ${JSON.stringify(json).slice(0, 300)}`);
    return { ms, answer: out };
  }

  /** Models in the cache by its table (`GET /models`). */
  async loadedCount(): Promise<number> {
    const res = await fetch(`${this.base}/models`, { signal: AbortSignal.timeout(30_000) });
    return ((await res.json()) as { loaded: unknown[] }).loaded.length;
  }

  snapshot(): Promise<Snapshot> {
    return snapshot(this.base, this.child.pid);
  }
}
