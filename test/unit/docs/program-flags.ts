import { helpOf } from '../../../cli/docs/cli-page.js';
import { SUBCOMMANDS } from '../../../cli/commands.js';
import { parseByteQuantity } from '../../../common/config.js';

/** A flag as the program declares it: its variable and the value it takes when neither is set. */
export interface ProgramFlag {
  env: string | undefined;
  default: unknown;
}

/** What a program needs to parse at all (a required flag has no default to compare). */
const REQUIRED: Record<string, string[]> = {
  router: ['--routes', '/r=http://127.0.0.1:1'],
  replica: ['--model-source', 'file:///models'],
  models: ['--out', 'file:///models'],
};

const camel = (flag: string): string => flag.replace(/-([a-z0-9])/g, (_m, c: string) => c.toUpperCase());

/**
 * Every flag of `modelmux <command>`, read from its `--help` (flag and variable) and from its
 * parser given only the required flags (defaults; a config key is its flag in camelCase).
 */
export async function programFlags(command: string): Promise<Map<string, ProgramFlag>> {
  const sub = SUBCOMMANDS[command];
  if (sub === undefined) throw new Error(`no subcommand "${command}"`);
  const required = REQUIRED[command] ?? [];
  const config = (await sub.config())(required, {}) as Record<string, unknown>;
  const flags = new Map<string, ProgramFlag>();
  for (const m of (await helpOf(command)).matchAll(/^ {2}--([a-z0-9-]+)(?: \(env ([A-Z0-9_]+)\))?$/gm)) {
    const flag = m[1] ?? '';
    if (flag === 'help') continue;
    flags.set(flag, { env: m[2], default: required.includes(`--${flag}`) ? undefined : config[camel(flag)] });
  }
  return flags;
}

/**
 * A value as the docs write it, in the flag's unit: `8Mi` → bytes, `30 s` → 30000 for a `-ms`
 * flag, `10000` → 10000, `true` → true; anything else stays text.
 */
export function documentedValue(flag: string, text: string): unknown {
  const t = text.replaceAll(',', '');
  const time = /^(\d+(?:\.\d+)?) ?(s|min)$/.exec(t);
  if (time) {
    const seconds = Number(time[1]) * (time[2] === 'min' ? 60 : 1);
    return flag.endsWith('-ms') ? seconds * 1000 : seconds;
  }
  if (/^-?\d+(?:\.\d+)?$/.test(t)) return Number(t);
  if (/^\d+(?:\.\d+)?(k|Ki|M|Mi|G|Gi|T|Ti)$/.test(t)) return parseByteQuantity(t);
  if (t === 'true' || t === 'false') return t === 'true';
  return text;
}
