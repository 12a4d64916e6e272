/** A Markdown table from a header row and body rows. */
export function mdTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  return [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

/** Fixed decimals, or `n/a` for a value that could not be measured. */
export function fmt(n: number | undefined, digits = 1): string {
  return n === undefined || !Number.isFinite(n) ? 'n/a' : n.toFixed(digits);
}
