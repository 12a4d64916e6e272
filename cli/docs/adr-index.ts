/** An ADR as read from docs/adr/: its file name and its text. */
export interface AdrFile {
  name: string;
  text: string;
}

export interface AdrHead {
  number: string;
  title: string;
  /** The status paragraph's first clause: `accepted`, `superseded by [ADR 0026](…)`… */
  status: string;
}

export const ADR_FILE = /^(\d{4})-[a-z0-9-]+\.md$/;

/**
 * An ADR's title and status, from its first lines: `# NNNN Title`, a blank line, then a paragraph
 * `Status: <status>[: what changed].` (docs/adr/README.md). Throws on an ADR without them, so
 * the index cannot silently leave one out.
 */
export function adrHead(adr: AdrFile): AdrHead {
  const number = ADR_FILE.exec(adr.name)?.[1];
  const title = /^# (\d{4})(?::| —)? +(.+)\n/.exec(adr.text);
  if (number === undefined || title === null || title[1] !== number) throw new Error(`${adr.name}: no "# ${number ?? 'NNNN'} Title" first line`);
  const paragraph = /^\n(Status: [^\n]+(?:\n[^\n]+)*)\n/.exec(adr.text.slice(title[0].length))?.[1];
  if (paragraph === undefined) throw new Error(`${adr.name}: no "Status: …" paragraph under its title`);
  const clause = paragraph
    .replaceAll('\n', ' ')
    .slice('Status: '.length)
    .split(/: /)[0]
    ?.replace(/\.$/, '')
    // A link into the ADR itself, from the index beside it.
    .replaceAll('](#', `](${adr.name}#`);
  return { number, title: title[2] ?? '', status: clause ?? '' };
}

/** docs/adr/README.md's table: every ADR, its title and its status, in number order. */
export function adrIndex(adrs: readonly AdrFile[]): string {
  const rows = [...adrs]
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((adr) => {
      const head = adrHead(adr);
      return `| [${head.number}](${adr.name}) | ${head.title.replaceAll('|', '\\|')} | ${head.status} |`;
    });
  return ['| ADR | Decision | Status |', '|---|---|---|', ...rows, ''].join('\n');
}
