import { helpOf } from '../../../cli/docs/cli-page.js';
import { SUBCOMMANDS } from '../../../cli/commands.js';
import { documentedValue, programFlags } from './program-flags.js';

// Each flag's help says its default in words ("Default 8Mi.", "(default 3)") beside the zod
// default it describes; `Default: …` with a colon introduces prose, and a value with a
// placeholder (`file://<cwd>/models`) is worked out at start: neither is compared.
const STATED_DEFAULT = /\b[Dd]efault "?([^\s"();,<]+?)"?[.:]?(?=[\s;),]|$)/g;

describe('modelmux --help', () => {
  it.each(Object.keys(SUBCOMMANDS))('states the defaults that `modelmux %s` takes', async (command) => {
    const flags = await programFlags(command);
    const wrong: string[] = [];
    let stated = 0;
    for (const m of (await helpOf(command)).matchAll(/^ {2}--([a-z0-9-]+)[^\n]*\n {6}([^\n]*)$/gm)) {
      const flag = m[1] ?? '';
      const declared = flags.get(flag);
      for (const d of (m[2] ?? '').matchAll(STATED_DEFAULT)) {
        stated++;
        const value = documentedValue(flag, d[1] ?? '');
        if (value !== declared?.default) wrong.push(`--${flag}: help says default ${d[1]}, the parser takes ${String(declared?.default)}`);
      }
    }
    expect(wrong).toEqual([]);
    // Proof the pattern reads the help at all: three stated defaults, or one per flag of a smaller command (doctor).
    expect(stated).toBeGreaterThanOrEqual(Math.min(3, flags.size));
  });
});
