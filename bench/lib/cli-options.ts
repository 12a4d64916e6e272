import { z } from 'zod';
import { ConfigError, HelpRequested, helpText, parseConfig, type OptionSpecs } from '../../common/config.js';
import { machineInfo, type MachineInfo } from './machine.js';

/**
 * The one option parser of the bench programs: each declares its flags as a zod shape with
 * specs (common/config.ts, as the modelmux programs do), and gets `--help`, every bad flag
 * reported at once (exit 2), and `--out` (where its report goes) without declaring them.
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
  const outShape = { out: z.string().min(1).default(`bench/results/${p.name}`) };
  const schema = z.object({ ...p.schema.shape, ...outShape });
  const specs = { ...p.specs, out: { flag: 'out', help: `Results path without extension, from the repository root (default bench/results/${p.name}).` } } as OptionSpecs<typeof schema.shape>;
  if (argv.includes('--help') || argv.includes('-h')) {
    const text = helpText(`bench:${p.name}`, p.summary, specs).replace(/^usage: .*\n/, `usage: npm run bench:${p.name} -- [flags]\n`);
    throw new HelpRequested(text);
  }
  const parsed = parseConfig(`bench:${p.name}`, p.summary, schema, specs, argv, env) as z.infer<z.ZodObject<T>> & { out: string };
  const { out, ...options } = parsed;
  return { program: p.name, options: options as z.infer<z.ZodObject<T>>, out, command: benchCommand(p.name, argv), machine: machineInfo() };
}

/**
 * Runs a bench program with the command line: `--help` prints, a bad flag exits 2 with its
 * message (as the modelmux CLI does), any other failure exits 1 with its stack.
 */
export async function runBench<T extends z.ZodRawShape>(p: BenchProgram<T>, main: (run: BenchRun<z.infer<z.ZodObject<T>>>) => Promise<void>): Promise<void> {
  try {
    await main(parseBenchOptions(p, process.argv.slice(2), process.env));
  } catch (err) {
    if (err instanceof HelpRequested) process.stdout.write(err.text);
    else if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exitCode = 2;
    } else {
      process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = 1;
    }
  }
}
