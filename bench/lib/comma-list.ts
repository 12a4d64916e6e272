import { z } from 'zod';
import { ConfigError } from '../../common/config.js';

/**
 * A comma list of known names from a flag, in the order given. An unknown name or a repeat is
 * the command's error: the tables have one row per name and round, and a repeat is what
 * `--rounds` is for.
 */
export function commaList<T extends string>(program: string, raw: string, allowed: readonly T[], what: string): T[] {
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = items.filter((s) => !(allowed as readonly string[]).includes(s));
  if (bad.length > 0) throw new ConfigError(program, [`unknown ${what}: ${bad.join(', ')} (known: ${allowed.join(', ')})`]);
  const twice = items.filter((s, i) => items.indexOf(s) !== i);
  if (twice.length > 0) throw new ConfigError(program, [`${what} listed more than once: ${[...new Set(twice)].join(', ')} (use --rounds to measure each again)`]);
  return items as T[];
}

/** `--slots`: a comma list of distinct positive integers, one measured pool or service each. */
export const slotList = (defaults: string) =>
  z
    .string()
    .default(defaults)
    .transform((s, ctx) => {
      const out = s.split(',').map((x) => Number(x.trim()));
      if (out.some((n) => !Number.isInteger(n) || n < 1) || new Set(out).size !== out.length) ctx.addIssue({ code: 'custom', message: 'a comma list of distinct positive integers' });
      return out;
    });
