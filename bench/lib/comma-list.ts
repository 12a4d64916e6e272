import { ConfigError } from '../../common/config.js';

/**
 * A comma list of known names from a flag, in the order given. An unknown name or a repeat is
 * the command's error: the tables have one row per name and round, and a repeat is what
 * `--rounds` is for.
 */
export function commaList<T extends string>(program: string, raw: string, allowed: readonly T[], what: string): T[] {
  const items = raw.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = items.filter((s) => !(allowed as readonly string[]).includes(s));
  if (bad.length > 0) throw new ConfigError(program, [`unknown ${what}: ${bad.join(', ')} (known: ${allowed.join(', ')})`]);
  const twice = items.filter((s, i) => items.indexOf(s) !== i);
  if (twice.length > 0) throw new ConfigError(program, [`${what} listed more than once: ${[...new Set(twice)].join(', ')} (use --rounds to measure each again)`]);
  return items as T[];
}
