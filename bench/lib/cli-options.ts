import { z } from 'zod';
import { join } from 'node:path';
import { booleanString, ConfigError, HelpRequested, helpText, parseConfig, type OptionSpecs } from '../../common/config.js';
import { BusyMachineError } from './busy-machine.js';
import { DEV_RESULTS_DIR, DirtyTreeError } from './clean-tree.js';
import { machineInfo, type MachineInfo } from './machine.js';
import { refuseDirtyTree } from './report.js';

/**
 * The one option parser of the bench programs: each declares its flags as a zod shape with
 * specs (common/config.ts, as the modelmux programs do), and gets `--help`, every bad flag
 * reported at once (exit 2), `--out` (where its report goes) and `--allow-dirty` (a development
 * run from a tree with uncommitted changes, see clean-tree.ts) without declaring them.
 */
export interface BenchProgram<T extends z.ZodRawShape> {
  /** `load` for `npm run bench:load`; also names its results, bench/results/load.{json,md}. */
  name: string;
  /** One line for --help. */
  summary: string;
  schema: z.ZodObject<T>;
  specs: OptionSpecs<T>;
}

/** What a run knows about itself before it measures anything; report.ts writes it out. */
export interface BenchRun<O> {
  program: string;
  options: O;
  /** Results path without extension, relative to the repository root or absolute. */
  out: string;
  /** `--allow-dirty`: a development run, which may measure uncommitted code (clean-tree.ts). */
  allowDirty: boolean;
  /** The command that reproduces the run. */
  command: string;
  /** Taken when the run starts, so its load average is the machine's before the run. */
  machine: MachineInfo;
}

const quoted = (arg: string): string => (/^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", `'\\''`)}'`);

/** `npm run bench:<name> -- <args>`, each argument quoted when a shell would split it. */
export function benchCommand(name: string, argv: readonly string[]): string {
  return argv.length > 0 ? `npm run bench:${name} -- ${argv.map(quoted).join(' ')}` : `npm run bench:${name}`;
}

export function parseBenchOptions<T extends z.ZodRawShape>(p: BenchProgram<T>, argv: readonly string[], env: NodeJS.ProcessEnv): BenchRun<z.infer<z.ZodObject<T>>> {
  const ownShape = { out: z.string().min(1).optional(), allowDirty: booleanString.default(false) };
  const schema = z.object({ ...p.schema.shape, ...ownShape });
  const specs = {
    ...p.specs,
    out: { flag: 'out', help: `Results path without extension, from the repository root (default bench/results/${p.name}; ${join(DEV_RESULTS_DIR, p.name)} with --allow-dirty).` },
    allowDirty: { flag: 'allow-dirty', help: 'Run from a tree with uncommitted changes: a development run, marked as such and never written into bench/results/.' },
  } as OptionSpecs<typeof schema.shape>;
  if (argv.includes('--help') || argv.includes('-h')) {
    const text = helpText(`bench:${p.name}`, p.summary, specs).replace(/^usage: .*\n/, `usage: npm run bench:${p.name} -- [flags]\n`);
    throw new HelpRequested(text);
  }
  const parsed = parseConfig(`bench:${p.name}`, p.summary, schema, specs, argv, env) as z.infer<z.ZodObject<T>> & { out?: string; allowDirty: boolean };
  const { out, allowDirty, ...options } = parsed;
  return {
    program: p.name,
    options: options as z.infer<z.ZodObject<T>>,
    out: out ?? (allowDirty ? join(DEV_RESULTS_DIR, p.name) : `bench/results/${p.name}`),
    allowDirty,
    command: benchCommand(p.name, argv),
    machine: machineInfo(),
  };
}

/**
 * Runs a bench program with the command line: `--help` prints, a bad flag exits 2 with its
 * message (as the modelmux CLI does), a dirty tree exits 1 before anything is measured (and
 * writeReport checks again at the end), as does a busy machine where a bench checks for one,
 * any other failure exits 1 with its stack.
 */
export async function runBench<T extends z.ZodRawShape>(p: BenchProgram<T>, main: (run: BenchRun<z.infer<z.ZodObject<T>>>) => Promise<void>): Promise<void> {
  try {
    const run = parseBenchOptions(p, process.argv.slice(2), process.env);
    refuseDirtyTree(run, run.machine.uncommitted);
    await main(run);
  } catch (err) {
    if (err instanceof HelpRequested) process.stdout.write(err.text);
    else if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exitCode = 2;
    } else if (err instanceof DirtyTreeError || err instanceof BusyMachineError) {
      process.stderr.write(`${err.message}\n`);
      process.exitCode = 1;
    } else {
      process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = 1;
    }
  }
}
