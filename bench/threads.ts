import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { Pool } from 'undici';
import { z } from 'zod';
import ort from 'onnxruntime-node';
import { freePorts } from '../cli/local-processes.js';
import { intString, type OptionSpecs } from '../common/config.js';
import { createSession } from '../replica/onnx/onnx-runtime.js';
import { BusyMachineError, busyReason } from './lib/busy-machine.js';
import { startChild, type Child } from './lib/child.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { CNN, gflop, imageModelBytes, inputDims, inputImage, LARGE_INPUT, type ImageModel } from './lib/image-models.js';
import { fmt } from './lib/markdown.js';
import { routerUrl, startBenchRouter } from './lib/proxy-targets.js';
import { REPLICA_TUNING } from './lib/replica-tuning.js';
import { repoRoot, writeReport } from './lib/report.js';
import { median, percentile, rotated } from './lib/stats.js';

/**
 * `npm run bench:threads`: real-size image models at one client, run by onnxruntime in this
 * process and, with the same session options and threads, by a replica process over HTTP, directly
 * and through a router: what HTTP, the request's decoding and the replica's path add to a large
 * model. A CNN (1×3×224×224 FP32 in, 602 KB binary, about 5.5 GFLOP) in binary tensors and in
 * JSON, and a 4 MiB one-channel image through one light convolution, where the per-byte costs
 * show. A floor way runs the model in process and then posts the same body to a node:http
 * process that drops it: the least any replica behind a socket could take. The ways take turns request by request, in an order rotated every round, and the rounds
 * are apart (`--pause-ms`), so the machine's noise falls on all alike; a p50 is the median of the
 * rounds' p50s, with their spread. Refuses to start on a busy machine (`--max-load`). Writes
 * bench/results/threads.{json,md}.
 */

const schema = z.object({
  threads: intString(1, 256).default(2),
  requests: intString(3, 10_000).default(20),
  rounds: intString(1, 100).default(5),
  pauseMs: intString(0, 600_000).default(2_000),
  warmup: intString(0, 100).default(3),
  maxLoad: z.coerce.number().min(0).max(64).default(0.25),
});
type Options = z.infer<typeof schema>;
const specs: OptionSpecs<typeof schema.shape> = {
  threads: { flag: 'threads', help: 'Intra-op threads of every session, in process and in the replica (default 2).' },
  requests: { flag: 'requests', help: 'Measured runs of each way in each round (default 20).' },
  rounds: { flag: 'rounds', help: 'Rounds; each way is reported by the median of its rounds’ p50s and their spread (default 5).' },
  pauseMs: { flag: 'pause-ms', help: 'Idle time between rounds, so that no round follows on the one before (default 2000).' },
  warmup: { flag: 'warmup', help: 'Runs of each way before the first round, not measured (default 3).' },
  maxLoad: { flag: 'max-load', help: 'Refuse to start when the 1-minute load average per core is above this; 0 does not check (default 0.25).' },
};

type Form = 'binary' | 'json';

interface Case {
  model: ImageModel;
  form: Form;
}

const CASES: Case[] = [
  { model: CNN, form: 'binary' },
  { model: CNN, form: 'json' },
  { model: LARGE_INPUT, form: 'binary' },
];

const IN_PROCESS = 'onnxruntime in process';
const FLOOR = 'in process + the body posted to a node:http process that drops it';
const WAYS = [IN_PROCESS, FLOOR, 'replica, shared graph (the default)', 'replica, own session (config.json shareGraph: false)', 'router → replica, shared graph'] as const;

type Way = (typeof WAYS)[number];

/** The request body of a case, as tritonclient sends it: binary tensors answered in binary, or JSON. */
function request(c: Case): { body: Buffer; headers: Record<string, string> } {
  const image = inputImage(c.model);
  const shape = inputDims(c.model);
  if (c.form === 'json') {
    return { body: Buffer.from(JSON.stringify({ inputs: [{ name: 'image', shape, datatype: 'FP32', data: Array.from(image) }] })), headers: { 'content-type': 'application/json' } };
  }
  const bytes = Buffer.from(image.buffer, image.byteOffset, image.byteLength);
  const head = Buffer.from(JSON.stringify({ inputs: [{ name: 'image', shape, datatype: 'FP32', parameters: { binary_data_size: bytes.length } }], parameters: { binary_data_output: true } }));
  return { body: Buffer.concat([head, bytes]), headers: { 'inference-header-content-length': String(head.length), 'content-type': 'application/octet-stream' } };
}

/** The logits of an answer in either form. */
function logits(status: number, headers: Record<string, string | string[] | undefined>, all: Buffer, form: Form): Float32Array {
  if (status !== 200) throw new Error(`answered ${status}: ${all.subarray(0, 500).toString()}`);
  if (form === 'binary') return new Float32Array(new Uint8Array(all.subarray(Number(headers['inference-header-content-length']))).buffer);
  const body = JSON.parse(all.toString()) as { outputs: { data: number[] }[] };
  return Float32Array.from(body.outputs[0]?.data ?? []);
}

/**
 * One kept-alive connection to `origin`, written with undici's own API: fetch copies a request
 * body and streams it in pieces (about 10 ms more for 4 MiB here), a cost of the client that
 * would be counted as the replica's. `read` takes each answer whole.
 */
function poster<T>(
  origin: string,
  headers: Record<string, string>,
  body: Buffer,
  read: (status: number, headers: Record<string, string | string[] | undefined>, all: Buffer) => T,
): { post: (path: string) => Promise<T>; close: () => Promise<void> } {
  const pool = new Pool(origin, { connections: 1, pipelining: 1, keepAliveTimeout: 60_000 });
  return {
    post: async (path) => {
      const res = await pool.request({ method: 'POST', path, headers, body, headersTimeout: 120_000, bodyTimeout: 120_000 });
      return read(res.statusCode, res.headers, Buffer.from(await res.body.arrayBuffer()));
    },
    close: () => pool.close(),
  };
}

interface Row {
  model: string;
  form: Form;
  way: Way;
  /** Median of the rounds' p50s. */
  p50: number;
  /** The lowest and highest of the rounds' p50s. */
  spread: [number, number];
  p90: number;
  /** p50 / the in-process p50 of the same model. */
  ratio: number;
  /** The lowest and highest of the rounds' own ratios. */
  ratioSpread: [number, number];
}

/** Per case and way, the samples of each round. */
type Samples = Map<string, number[][]>;
const key = (c: Case, way: Way): string => `${c.model.id} ${c.form} ${way}`;

function rows(samples: Samples): Row[] {
  return CASES.flatMap((c) => {
    const p50s = (way: Way): number[] => (samples.get(key(c, way)) ?? []).map(median);
    const base = p50s(IN_PROCESS);
    return WAYS.map((way) => {
      const own = p50s(way);
      const ratios = own.map((p, r) => p / (base[r] ?? NaN));
      const all = (samples.get(key(c, way)) ?? []).flat().sort((a, b) => a - b);
      return {
        model: c.model.id,
        form: c.form,
        way,
        p50: median(own),
        spread: [Math.min(...own), Math.max(...own)],
        p90: percentile(all, 90),
        ratio: median(own) / median(base),
        ratioSpread: [Math.min(...ratios), Math.max(...ratios)],
      };
    });
  });
}

/**
 * One round of a case: `warm` unmeasured then `requests` measured runs of each way, the ways in
 * turn; `check` compares the first answers with onnxruntime's in process.
 */
async function oneRound(c: Case, run: Record<Way, () => Promise<Float32Array>>, ways: readonly Way[], warm: number, requests: number, check: boolean): Promise<Map<Way, number[]>> {
  const got = new Map<Way, number[]>(ways.map((w) => [w, []]));
  for (let i = 0; i < warm + requests; i++) {
    const answers = new Map<Way, Float32Array>();
    for (const way of ways) {
      const t = performance.now();
      answers.set(way, await run[way]());
      if (i >= warm) got.get(way)?.push(performance.now() - t);
    }
    const want = answers.get(IN_PROCESS) ?? new Float32Array(0);
    const differs = (b: Float32Array): boolean => b.length !== c.model.classes || want.some((v, j) => Math.abs(v - (b[j] ?? NaN)) > 1e-4);
    if (check && i === 0 && [...answers.values()].some(differs)) throw new Error(`the ways disagree on the logits of ${c.model.id} (${c.form})`);
  }
  return got;
}

/** The replica's `<id>` and `<id>-own` for every model, the second in a session of its own. */
async function writeModels(dir: string): Promise<void> {
  for (const m of [CNN, LARGE_INPUT]) {
    const bytes = imageModelBytes(m);
    for (const id of [m.id, `${m.id}-own`]) {
      await mkdir(join(dir, id));
      await writeFile(join(dir, id, 'model.onnx'), bytes);
    }
    await writeFile(join(dir, `${m.id}-own`, 'config.json'), JSON.stringify({ shareGraph: false }));
  }
}

async function main(bench: BenchRun<Options>): Promise<void> {
  const o = bench.options;
  const busy = busyReason(bench.machine.loadAverage1m, bench.machine.nproc, o.maxLoad);
  if (busy !== undefined) throw new BusyMachineError(busy);
  const cli = join(repoRoot(), 'dist/cli/main.js');
  const dir = await mkdtemp(join(tmpdir(), 'modelmux-bench-threads-'));
  await writeModels(dir);
  const children: Child[] = [];
  const sessions = new Map<string, ort.InferenceSession>();
  const clients: { close: () => Promise<void> }[] = [];
  try {
    const replica = await startChild(
      process.execPath,
      [cli, 'replica', '--host', '127.0.0.1', '--port', '0', '--model-source', pathToFileURL(dir).href, '--intra-op-threads', String(o.threads), '--max-models', '8'],
      { ready: /"event":"listening"[^\n]*"port":(\d+)/, readyTimeoutMs: 30_000 },
    );
    children.push(replica);
    const replicaUrl = `http://127.0.0.1:${replica.ready[1]}`;
    // The floor way's server (bench/lib/drop-server.ts): reads each body and keeps none of it.
    const drop = await startChild(process.execPath, [join(repoRoot(), 'dist/bench/lib/drop-server.js')], { ready: /drop server on (\d+)/, readyTimeoutMs: 30_000 });
    children.push(drop);
    const dropUrl = `http://127.0.0.1:${drop.ready[1]}`;
    const [routerPort] = await freePorts(1);
    children.push(await startBenchRouter(cli, routerPort ?? 0, replicaUrl));
    for (const m of [CNN, LARGE_INPUT]) sessions.set(m.id, await createSession(join(dir, m.id, 'model.onnx'), 'cpu', { ...REPLICA_TUNING, intraOpThreads: o.threads }));

    const runs = (c: Case): Record<Way, () => Promise<Float32Array>> => {
      const { body, headers } = request(c);
      const answer = (status: number, h: Record<string, string | string[] | undefined>, all: Buffer): Float32Array => logits(status, h, all, c.form);
      const direct = poster(replicaUrl, headers, body, answer);
      const routed = poster(new URL(routerUrl(routerPort ?? 0)).origin, headers, body, answer);
      const floor = poster(dropUrl, headers, body, (status) => {
        if (status !== 200) throw new Error(`the drop server answered ${status}`);
      });
      clients.push(direct, routed, floor);
      const image = inputImage(c.model);
      const session = sessions.get(c.model.id) as ort.InferenceSession;
      const inProcess = async (): Promise<Float32Array> => (await session.run({ image: new ort.Tensor('float32', image, inputDims(c.model)) }))['logits']!.data as Float32Array;
      return {
        [IN_PROCESS]: inProcess,
        [FLOOR]: async () => {
          const logits = await inProcess();
          await floor.post('/');
          return logits;
        },
        'replica, shared graph (the default)': () => direct.post(`/v2/models/${c.model.id}/infer`),
        'replica, own session (config.json shareGraph: false)': () => direct.post(`/v2/models/${c.model.id}-own/infer`),
        'router → replica, shared graph': () => routed.post(`${new URL(routerUrl(routerPort ?? 0)).pathname}v2/models/${c.model.id}/infer`),
      };
    };

    const byCase = CASES.map(runs);
    const samples: Samples = new Map();
    for (let round = 0; round < o.rounds; round++) {
      if (round > 0) await sleep(o.pauseMs);
      for (const [k, c] of CASES.entries()) {
        const got = await oneRound(c, byCase[k]!, rotated(WAYS, round), round === 0 ? o.warmup : 0, o.requests, round === 0);
        for (const [way, times] of got) samples.set(key(c, way), [...(samples.get(key(c, way)) ?? []), times]);
      }
    }

    const table = rows(samples);
    const range = (r: [number, number], digits?: number): string => `${fmt(r[0], digits)}–${fmt(r[1], digits)}`;
    await writeReport(bench, {
      title: 'Threads: real-size image models at one client',
      setup:
        `${o.rounds} rounds ${o.pauseMs} ms apart, ${o.requests} runs of each way a round, taking turns in an order rotated each round; ${o.threads} intra-op thread(s) everywhere. ` +
        `${CNN.id}: 1×3×224×224 FP32 in (602 KB), ${fmt(gflop(CNN), 1)} GFLOP a run; ${LARGE_INPUT.id}: 1×1×1024×1024 FP32 in (4 MiB), ${fmt(gflop(LARGE_INPUT), 2)} GFLOP. ` +
        `Started at a 1-minute load average of ${bench.machine.loadAverage1m} on ${bench.machine.nproc} cores (refused above ${o.maxLoad} per core).`,
      sections: [
        {
          headline: true,
          table: {
            header: ['model', 'body', '', 'p50 ms', 'round p50s', 'p90 ms', 'p50 / in process', 'rounds’ ratios'],
            rows: table.map((r) => [r.model, r.form, r.way, fmt(r.p50), range(r.spread), fmt(r.p90), fmt(r.ratio, 3), range(r.ratioSpread, 3)]),
          },
          after:
            'Goal: the replica at most 1.05× onnxruntime in process at p50 with binary tensors, and at most 1.1× through the router (docs/adr/0051-replica-request-path.md). JSON rows show what decoding a body of numbers costs. ' +
            `"${FLOOR}" is the floor of a replica in another process: the model run here, then the same body posted to a node:http server that reads it, keeps none of it and answers two bytes: the least any replica behind a socket could take.`,
        },
      ],
      data: { gflopPerRun: { [CNN.id]: gflop(CNN), [LARGE_INPUT.id]: gflop(LARGE_INPUT) }, rows: table },
    });
  } finally {
    for (const client of clients) await client.close();
    for (const s of sessions.values()) await s.release();
    for (const c of children.reverse()) await c.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await runBench({ name: 'threads', summary: 'Real-size image models at one client: a replica, directly and through a router, against onnxruntime in process, same threads.', schema, specs }, main);
