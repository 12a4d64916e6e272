import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { intString, type OptionSpecs } from '../common/config.js';
import { encodeOnnxModel, type OnnxGraph, type OnnxTensor } from '../common/onnx-writer.js';
import { createSession } from '../replica/onnx/onnx-runtime.js';
import { startChild } from './lib/child.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { fmt } from './lib/markdown.js';
import { REPLICA_TUNING } from './lib/replica-tuning.js';
import { repoRoot, writeReport } from './lib/report.js';
import { median, percentile } from './lib/stats.js';
import ort from 'onnxruntime-node';

/**
 * `npm run bench:threads`: a real-size CNN (three 3×3 convolutions on a 224×224 image, then a
 * 1000-way classifier: about 5.5 GFLOP a run) at one client, served by a replica process with
 * `--intra-op-threads N` against onnxruntime in this process with the same session options and
 * threads. The two take turns, request by request, so the machine's noise falls on both alike.
 * The replica's p50 should be at most 1.1× the in-process one: what HTTP, the binary tensor
 * extension and the replica's path add to a large model. Writes bench/results/threads.{json,md}.
 */

const schema = z.object({
  threads: intString(1, 256).default(2),
  requests: intString(5, 10_000).default(40),
  warmup: intString(0, 100).default(3),
});
type Options = z.infer<typeof schema>;
const specs: OptionSpecs<typeof schema.shape> = {
  threads: { flag: 'threads', help: 'Intra-op threads of both sessions (default 2).' },
  requests: { flag: 'requests', help: 'Measured runs of each (default 40).' },
  warmup: { flag: 'warmup', help: 'Runs of each before measuring (default 3).' },
};

const SIZE = 224;
const CLASSES = 1000;
/** Multiply-adds ×2 of the three convolutions (224→222→220→218) and the classifier. */
const GFLOP = (2 * (32 * 3 * 9 * 222 ** 2 + 64 * 32 * 9 * 220 ** 2 + 64 * 64 * 9 * 218 ** 2 + CLASSES * 64)) / 1e9;

/** Deterministic weights in [-0.05, 0.05). */
function weights(name: string, dims: number[], seed: number): OnnxTensor {
  const n = dims.reduce((a, b) => a * b, 1);
  const data = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    data[i] = (s / 2 ** 32 - 0.5) * 0.1;
  }
  return { name, dims, data };
}

function cnn(): Uint8Array {
  const channels = [3, 32, 64, 64];
  const g: OnnxGraph = { name: 'cnn', nodes: [], initializers: [], inputs: [{ name: 'image', shape: [1, 3, SIZE, SIZE] }], outputs: [{ name: 'logits', shape: [1, CLASSES] }], opset: 17 };
  let x = 'image';
  for (let l = 1; l < channels.length; l++) {
    g.initializers.push(weights(`w${l}`, [channels[l]!, channels[l - 1]!, 3, 3], l), weights(`b${l}`, [channels[l]!], 10 + l));
    g.nodes.push({ opType: 'Conv', inputs: [x, `w${l}`, `b${l}`], outputs: [`c${l}`] }, { opType: 'Relu', inputs: [`c${l}`], outputs: [`r${l}`] });
    x = `r${l}`;
  }
  g.initializers.push(weights('fc', [CLASSES, 64], 99), weights('fcb', [CLASSES], 100));
  g.nodes.push(
    { opType: 'GlobalAveragePool', inputs: [x], outputs: ['pooled'] },
    { opType: 'Flatten', inputs: ['pooled'], outputs: ['flat'] },
    { opType: 'Gemm', inputs: ['flat', 'fc', 'fcb'], outputs: ['logits'], intAttributes: { transB: 1 } },
  );
  return encodeOnnxModel(g);
}

async function main(bench: BenchRun<Options>): Promise<void> {
  const o = bench.options;
  const dir = await mkdtemp(join(tmpdir(), 'modelmux-bench-threads-'));
  const replica = await startChild(
    process.execPath,
    [join(repoRoot(), 'dist/cli/main.js'), 'replica', '--host', '127.0.0.1', '--port', '0', '--model-source', pathToFileURL(dir).href, '--intra-op-threads', String(o.threads)],
    {
      ready: /"event":"listening"[^\n]*"port":(\d+)/,
      readyTimeoutMs: 30_000,
    },
  );
  const model = cnn();
  for (const id of ['cnn', 'cnn-own']) {
    await mkdir(join(dir, id));
    await writeFile(join(dir, id, 'model.onnx'), model);
  }
  // The same model in a session of its own, as a model whose config.json says so gets it.
  await writeFile(join(dir, 'cnn-own', 'config.json'), JSON.stringify({ shareGraph: false }));
  const session = await createSession(join(dir, 'cnn', 'model.onnx'), 'cpu', { ...REPLICA_TUNING, intraOpThreads: o.threads });
  try {
    const base = `http://127.0.0.1:${replica.ready[1]}/v2/models`;
    const image = weights('image', [1, 3, SIZE, SIZE], 7).data;
    const bytes = Buffer.from(image.buffer, image.byteOffset, image.byteLength);
    const head = Buffer.from(
      JSON.stringify({ inputs: [{ name: 'image', shape: [1, 3, SIZE, SIZE], datatype: 'FP32', parameters: { binary_data_size: bytes.length } }], parameters: { binary_data_output: true } }),
    );
    const body = Buffer.concat([head, bytes]);
    const viaReplica = async (id: string): Promise<Float32Array> => {
      const res = await fetch(`${base}/${id}/infer`, { method: 'POST', headers: { 'inference-header-content-length': String(head.length), 'content-type': 'application/octet-stream' }, body });
      const all = Buffer.from(await res.arrayBuffer());
      if (res.status !== 200) throw new Error(`replica answered ${res.status}: ${all.toString()}`);
      const json = Number(res.headers.get('inference-header-content-length'));
      return new Float32Array(new Uint8Array(all.subarray(json)).buffer);
    };
    const inProcess = async (): Promise<Float32Array> => (await session.run({ image: new ort.Tensor('float32', image, [1, 3, SIZE, SIZE]) }))['logits']!.data as Float32Array;
    const ways: [string, () => Promise<Float32Array>][] = [
      ['onnxruntime in process', inProcess],
      ['replica, own session (config.json shareGraph: false)', () => viaReplica('cnn-own')],
      ['replica, shared graph (the default)', () => viaReplica('cnn')],
    ];
    const samples = ways.map((): number[] => []);
    for (let i = 0; i < o.warmup + o.requests; i++) {
      const answers: Float32Array[] = [];
      for (const [k, [, run]] of ways.entries()) {
        const t = performance.now();
        answers.push(await run());
        if (i >= o.warmup) samples[k]!.push(performance.now() - t);
      }
      const [want, ...got] = answers;
      if (i === 0 && got.some((b) => want!.length !== CLASSES || want!.some((v, k) => Math.abs(v - (b[k] ?? NaN)) > 1e-4))) throw new Error('the replica and onnxruntime disagree on the logits');
    }
    for (const s of samples) s.sort((a, b) => a - b);
    const rows = ways.map(([name], k) => ({ name, p50: median(samples[k]!), p90: percentile(samples[k]!, 90), ratio: median(samples[k]!) / median(samples[0]!) }));
    await writeReport(bench, {
      title: 'Threads: a real-size CNN at one client',
      setup: `${o.requests} runs each, taking turns, ${o.threads} intra-op thread(s) in both; the replica over HTTP with binary tensors; ${fmt(GFLOP, 1)} GFLOP a run.`,
      sections: [
        {
          headline: true,
          table: { header: ['', 'p50 ms', 'p90 ms', 'p50 / in process'], rows: rows.map((r) => [r.name, fmt(r.p50), fmt(r.p90), fmt(r.ratio, 3)]) },
          after: 'Goal: the replica at most 1.1× onnxruntime in process at p50.',
        },
      ],
      data: { gflopPerRun: GFLOP, rows },
    });
  } finally {
    await session.release();
    await replica.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await runBench({ name: 'threads', summary: 'A real-size CNN at one client: a replica against onnxruntime in process, same threads.', schema, specs }, main);
