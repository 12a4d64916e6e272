import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { machineLine } from './machine.js';
import { REPORT_FORMAT, sectionMarkdown, type ReportFile } from './report.js';

/**
 * bench/RESULTS.md's content: a header written by hand, then per benchmark what it measures and
 * the headline sections of its newest report (bench/results/<name>.json, report.ts's format).
 * A benchmark whose file is missing or in an older format gets a line saying how to run it.
 */

export interface ProgramEntry {
  /** `npm run bench:<name>`, bench/results/<name>.json. */
  name: string;
  /** What it measures, in a sentence or two. */
  measures: string;
  /** Said instead of the usual "not yet run" line while it has no report: why, and how to run it. */
  notRun?: string;
}

/** In the page's order: the main claim first, then the parts that explain it. */
export const PROGRAMS: readonly ProgramEntry[] = [
  {
    name: 'mux',
    measures:
      'modelmux local mode against Ray Serve multiplexing (its default proxy and its high-throughput HAProxy ingress) on the same models in the same S3 store: open-loop Poisson rates stepped up, the highest rate each system sustains (p99 ≤ 250 ms, no errors), systems alternated over rounds.',
  },
  {
    name: 'grpc',
    measures:
      'The Open Inference Protocol over HTTP/JSON and over gRPC through the same router to the same replicas: requests per CPU-second of the router and the replicas, p50 and p99 of closed-loop clients, then p99 at an equal offered load below saturation (open loop).',
  },
  { name: 'autoscale', measures: "A step load against the operator's own HPA (prometheus-adapter, the chart's rules) on the test cluster: time to scale up and down, and the requests it cost." },
  { name: 'sim', measures: "The placement simulator: the router's placement against a Ray-like router and the ideal global LRU, loads and wait per traffic pattern and pool shape, no processes." },
  {
    name: 'proxy',
    measures:
      "What the router adds in front of one replica, against nginx (plain and doing the router's per-request work) and a byte relay: latency, throughput and requests per proxy CPU-second (target: router ≥ 0.5× nginx).",
  },
  { name: 'router-ab', measures: "The router and nginx (or another build) loaded side by side, CPU per request of each: a ratio the machine's phases cannot move." },
  { name: 'load', measures: "The replica's load path alone: a session per model, shared-graph sessions reading the file, and mapping it; CPU and wall time per load." },
  { name: 'serve', measures: "One replica's serving path in one process by traffic pattern, with few slots (loads) and a slot for every model (none): CPU per request and per load." },
  { name: 'spread', measures: "Two modelmux pools side by side (bench:mux's slots and a slot for every model) taking turns: where a throughput spread across patterns comes from." },
  { name: 'cold', measures: "A run over weights not in the CPU's cache, alone: mapped, read into memory, and on huge pages." },
  {
    name: 'gpu-check',
    measures:
      'A replica on `--execution-provider cuda` with many models: loads per second by tier, the first run after a load against warm runs, device bytes per model against the budget, device memory given back by eviction, answers against the CPU provider.',
    notRun:
      'Has not run on a GPU yet: no development session has been lent one. It runs by hand on a GPU machine, which has no network, so it travels there in parts: [gpu/README.md](gpu/README.md). CI runs it on the CPU provider as a dry run (`test/integration/bench/gpu-check-dry-run.test.ts`), which is never written here.',
  },
  {
    name: 'threads',
    measures:
      'Real-size image models at one client: a replica process, directly and through a router, against onnxruntime in process with the same threads (goal: p50 ≤ 1.05× with binary tensors, ≤ 1.1× through the router).',
  },
  {
    name: 'hostile',
    measures:
      'Good traffic alone and beside hostile clients (HTTP/1.1: stalled bodies and heads, slow readers, nesting bombs, idle connections; gRPC over HTTP/2: stalled messages, window-1 readers, rapid reset, decode bombs, idle connections): p99 ratio (target ≤ 1.5).',
  },
  { name: 'tables', measures: "What replicas' model tables cost the Kubernetes control plane against the pool size: patches, etcd writes, watch bytes, router CPU, change-to-router time." },
  {
    name: 'sagemaker',
    measures:
      "The SageMaker multi-model article's load test: Locust over its three traffic patterns (uniform, one hot model, five popular) against a local pool serving 1,000 copies of one model.tar.gz from S3 through the runtime API: requests/s, p50 and p99 per pattern.",
  },
  { name: 'sidecar', measures: "Sidecar mode's hop in front of MLServer, and its loads split into the folder copy and MLServer's load." },
];

export const MAX_LINES = 300;

const tableSchema = z.object({ header: z.array(z.string()), rows: z.array(z.array(z.string())) });
const fileSchema = z.object({
  format: z.literal(REPORT_FORMAT),
  program: z.string(),
  title: z.string(),
  command: z.string(),
  date: z.string(),
  gitCommit: z.string(),
  machine: z.looseObject({ date: z.string() }),
  setup: z.string(),
  sections: z.array(z.object({ heading: z.string().optional(), text: z.string().optional(), table: tableSchema.optional(), after: z.string().optional(), headline: z.boolean().optional() })),
});

/** The report in bench/results/<name>.json, or undefined when there is none in this format. */
export function readReport(resultsDir: string, name: string): ReportFile | undefined {
  const path = join(resultsDir, `${name}.json`);
  if (!existsSync(path)) return undefined;
  const parsed = fileSchema.safeParse(JSON.parse(readFileSync(path, 'utf8')));
  return parsed.success ? (parsed.data as unknown as ReportFile) : undefined;
}

function programSection(p: ProgramEntry, f: ReportFile | undefined): string {
  const head = `## \`npm run bench:${p.name}\`\n\n${p.measures}`;
  if (!f) return `${head}\n\n${p.notRun ?? `Not yet run in this format: \`npm run bench:${p.name}\`.`}`;
  // The headline sections, or the first table when a report marks none.
  const marked = f.sections.filter((s) => s.headline);
  const shown = marked.length > 0 ? marked : f.sections.filter((s) => s.table).slice(0, 1);
  return [`${head} Last run: \`${f.command}\`; ${machineLine(f.machine)}. Setup and every table: [results/${p.name}.md](results/${p.name}.md).`, ...shown.map((s) => sectionMarkdown(s, '###'))].join(
    '\n\n',
  );
}

/** The page: the header as written, then each benchmark's newest headline tables. */
export function resultsPage(header: string, programs: readonly ProgramEntry[], report: (name: string) => ReportFile | undefined): string {
  return `${[header.trimEnd(), ...programs.map((p) => programSection(p, report(p.name)))].join('\n\n')}\n`;
}
