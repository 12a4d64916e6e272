import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hiddenUnitsForBytes, SAMPLE_WINE, wineModelBytes } from '../common/wine-model.js';
import { GraphSessions } from '../replica/onnx/graph-sessions.js';
import type { ExecutionProvider } from '../replica/onnx/onnx-runtime.js';
import { warmUp } from '../replica/onnx/warm-up.js';
import { median } from './lib/stats.js';

/**
 * `npm run bench:session-kind [-- cuda]`: shared graph against own session, per model size, on
 * one provider (docs/adr/0046-device-memory-budget.md). For each size, two models of one graph
 * are opened each way; the second's load, its warm-up run and the median of 200 one-row runs
 * are printed, one JSON line per size. Under CUDA the shared graph's runs carry the weights'
 * copy to the device: the figures that set CUDA_OWN_SESSION_BYTES.
 */
const provider: ExecutionProvider = process.argv[2] === 'cuda' ? 'cuda' : 'cpu';
const SIZES_MIB = [0, 4, 16, 64];
const RUNS = 200;
const tuning = { graphOptimization: 'basic', prepackWeights: false, shareGraphs: true, intraOpThreads: 1, interOpThreads: 1 } as const;
const row = { datatype: 'FP32' as const, dims: [1, SAMPLE_WINE.length], data: Float32Array.from(SAMPLE_WINE) };

const ms = (from: number): number => +(performance.now() - from).toFixed(3);

const dir = await mkdtemp(join(tmpdir(), 'modelmux-session-kind-'));
try {
  for (const mib of SIZES_MIB) {
    const hidden = hiddenUnitsForBytes(mib === 0 ? undefined : mib * 1024 ** 2);
    const paths: string[] = [];
    for (const id of ['a', 'b']) {
      const path = join(dir, `${mib}-${id}.onnx`);
      await writeFile(path, wineModelBytes(`${mib}-${id}`, hidden));
      paths.push(path);
    }
    const bytes = wineModelBytes('size', hidden).length;
    const line: Record<string, unknown> = { provider, modelBytes: bytes };
    for (const shareGraph of [true, false]) {
      const sessions = new GraphSessions(provider, tuning);
      const first = await sessions.open(paths[0] as string, false, { shareGraph }, bytes);
      let t = performance.now();
      const model = await sessions.open(paths[1] as string, false, { shareGraph }, bytes);
      const loadMs = ms(t);
      t = performance.now();
      await warmUp(model, undefined);
      const warmMs = ms(t);
      const runs: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        t = performance.now();
        await model.run([row]);
        runs.push(ms(t));
      }
      line[shareGraph ? 'shared' : 'own'] = { kind: model.kind, loadMs, warmMs, runMs: +median(runs).toFixed(3) };
      await Promise.all([first.release(), model.release()]);
    }
    process.stdout.write(`${JSON.stringify(line)}\n`);
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
