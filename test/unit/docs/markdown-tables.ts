/** A Markdown table: its header cells and its rows' cells, as written (backticks kept). */
export interface MarkdownTable {
  header: string[];
  rows: string[][];
}

/** Cells of one `| a | b |` line; `\|` stays inside its cell. */
function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\||\|$/g, '')
    .split(/(?<!\\)\|/)
    .map((c) => c.trim().replaceAll('\\|', '|'));
}

/** Every table of a page: a header line, a `|---|` line, then rows (indented tables too). */
export function markdownTables(page: string): MarkdownTable[] {
  const lines = page.split('\n');
  const tables: MarkdownTable[] = [];
  for (let i = 0; i + 1 < lines.length; i++) {
    if (!/^\s*\|/.test(lines[i] ?? '') || !/^\s*\|(\s*:?-+:?\s*\|)+\s*$/.test(lines[i + 1] ?? '')) continue;
    const table: MarkdownTable = { header: cells(lines[i] ?? ''), rows: [] };
    for (i += 2; i < lines.length && /^\s*\|/.test(lines[i] ?? ''); i++) table.rows.push(cells(lines[i] ?? ''));
    tables.push(table);
  }
  return tables;
}
