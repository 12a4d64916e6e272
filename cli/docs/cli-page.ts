import { HelpRequested } from '../../common/config.js';
import { SUBCOMMANDS, usage } from '../commands.js';

/** What `modelmux <command> --help` prints: its parser's help, without starting the program. */
export async function helpOf(command: string): Promise<string> {
  const sub = SUBCOMMANDS[command];
  if (sub === undefined) throw new Error(`no subcommand "${command}"`);
  const parse = await sub.config();
  try {
    parse(['--help'], {});
  } catch (err) {
    if (err instanceof HelpRequested) return err.text;
    throw err;
  }
  throw new Error(`modelmux ${command} --help printed no help`);
}

const fenced = (text: string): string => `\`\`\`text\n${text}\`\`\`\n`;

/** docs/cli.md: the help of the command and of each subcommand, as they print it. */
export async function cliPage(): Promise<string> {
  const sections = [
    '# The `modelmux` command\n',
    "<!-- Generated from each subcommand's --help by `npm run docs`; do not edit: a unit test fails on drift. -->\n",
    'One command, one subcommand per program; each reads flags or environment variables (a flag wins), validates them with zod and, when something is wrong, prints every problem at once and exits with code 2. `--help` prints the text below.\n',
    fenced(usage()),
  ];
  for (const command of Object.keys(SUBCOMMANDS)) sections.push(`## modelmux ${command}\n`, fenced(await helpOf(command)));
  return sections.join('\n');
}
