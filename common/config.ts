import { z } from 'zod';

/**
 * Configuration from flags and environment, validated by one zod schema per program.
 * A flag wins over its environment variable; every problem is reported at once, so a bad
 * deployment is fixed in one round rather than one error per restart.
 */

export interface OptionSpec {
  /** Long flag without dashes, e.g. `max-models` for `--max-models 3` or `--max-models=3`. */
  flag: string;
  /** Environment variable, e.g. `MODELMUX_MAX_MODELS`. */
  env?: string;
  /** One line for --help. */
  help: string;
}

export type OptionSpecs<T extends z.ZodRawShape> = { [K in keyof T]: OptionSpec };

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(program: string, problems: string[]) {
    super(`modelmux ${program}: invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export class HelpRequested extends Error {
  constructor(readonly text: string) {
    super(text);
    this.name = 'HelpRequested';
  }
}

/** Collects `--flag value`, `--flag=value` and bare `--flag` (meaning true). */
function readFlags(argv: readonly string[], known: Set<string>, problems: string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (!arg.startsWith('--')) {
      problems.push(`unexpected argument "${arg}"`);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    if (!known.has(name)) {
      problems.push(`unknown flag --${name}`);
      continue;
    }
    if (eq !== -1) out.set(name, arg.slice(eq + 1));
    else if (i + 1 < argv.length && !(argv[i + 1] ?? '').startsWith('--')) out.set(name, argv[++i] ?? '');
    else out.set(name, 'true');
  }
  return out;
}

export function helpText<T extends z.ZodRawShape>(program: string, summary: string, specs: OptionSpecs<T>): string {
  const rows = Object.values<OptionSpec>(specs).map((s) => `  --${s.flag}${s.env ? ` (env ${s.env})` : ''}\n      ${s.help}`);
  return `usage: modelmux ${program} [flags]\n\n${summary}\n\nflags:\n${rows.join('\n')}\n  --help\n      Print this help.\n`;
}

/**
 * Parses argv and env against `schema`. Values arrive as strings: use z.coerce or
 * `booleanString` in the schema for numbers and booleans.
 */
export function parseConfig<T extends z.ZodRawShape>(
  program: string,
  summary: string,
  schema: z.ZodObject<T>,
  specs: OptionSpecs<T>,
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): z.infer<z.ZodObject<T>> {
  if (argv.includes('--help') || argv.includes('-h')) throw new HelpRequested(helpText(program, summary, specs));
  const problems: string[] = [];
  const byFlag = new Map(Object.entries<OptionSpec>(specs).map(([key, s]) => [s.flag, key]));
  const flags = readFlags(argv, new Set(byFlag.keys()), problems);
  const raw: Record<string, string> = {};
  for (const [key, s] of Object.entries<OptionSpec>(specs)) {
    const v = flags.get(s.flag) ?? (s.env !== undefined ? env[s.env] : undefined);
    if (v !== undefined && v !== '') raw[key] = v;
  }
  const r = schema.safeParse(raw);
  if (!r.success) {
    for (const issue of r.error.issues) {
      const key = String(issue.path[0] ?? '');
      const s = (specs as Record<string, OptionSpec | undefined>)[key];
      const where = s ? `--${s.flag}${s.env ? `/${s.env}` : ''}` : key;
      problems.push(`${where}: ${issue.message}`);
    }
  }
  if (problems.length > 0 || !r.success) throw new ConfigError(program, problems);
  return r.data;
}

/** A whole number from a flag or variable, within [min, max]. */
export const intString = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

/** "true"/"false"/"1"/"0" as a boolean; z.coerce.boolean would take "false" as true. */
export const booleanString = z.enum(['true', 'false', '1', '0', 'yes', 'no']).transform((v) => v === 'true' || v === '1' || v === 'yes');

/** A byte count such as `512Mi`, `4Gi` or `1000000`. */
export function parseByteQuantity(s: string): number | undefined {
  const m = /^([0-9]+(?:\.[0-9]+)?)(k|Ki|M|Mi|G|Gi|T|Ti)?$/.exec(s);
  if (!m) return undefined;
  const units: Record<string, number> = { k: 1e3, Ki: 1024, M: 1e6, Mi: 1024 ** 2, G: 1e9, Gi: 1024 ** 3, T: 1e12, Ti: 1024 ** 4 };
  return Math.floor(Number(m[1]) * (m[2] ? (units[m[2]] ?? 1) : 1));
}

export const byteQuantityString = z.string().transform((s, ctx) => {
  const n = parseByteQuantity(s);
  if (n === undefined) {
    ctx.addIssue({ code: 'custom', message: `"${s}" is not a byte quantity such as 512Mi or 4Gi` });
    return z.NEVER;
  }
  return n;
});
