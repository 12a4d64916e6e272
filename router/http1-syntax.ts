/** Header fields by lowercased name; a repeated field keeps every value, in order. */
export type HeaderRecord = Record<string, string | string[]>;

/** A message that does not follow HTTP/1.1's syntax: the connection cannot be trusted after it. */
export class ProtocolError extends Error {
  readonly code = 'HTTP_PROTOCOL_ERROR';
}

/** RFC 9110 §5.6.2 token: what a field name (and a method) may hold. */
export const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Field value characters: visible ASCII, obs-text, space and tab (no CR, LF or NUL). */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * One `name: value` line as `[name, value]`, the name as sent and the value trimmed. Refuses
 * folded lines (obs-fold), whitespace before the colon and characters a field may not hold,
 * so a field cannot be read one way here and another way by the next hop.
 */
export function splitHeaderLine(line: string): [string, string] {
  const colon = line.indexOf(':');
  if (colon <= 0) throw new ProtocolError('malformed header line');
  const name = line.slice(0, colon);
  if (!TOKEN.test(name)) throw new ProtocolError('bad header name');
  const value = line.slice(colon + 1).trim();
  if (!FIELD_VALUE.test(value)) throw new ProtocolError('bad header value');
  return [name, value];
}

/** The members of a comma-separated field such as Connection: lowercased, trimmed, empty ones dropped. */
export function fieldTokens(value: string | readonly string[]): string[] {
  const out: string[] = [];
  for (const v of typeof value === 'string' ? [value] : value) {
    for (const t of v.split(',')) {
      const token = t.trim().toLowerCase();
      if (token !== '') out.push(token);
    }
  }
  return out;
}

/** Parses `lines[from..]` (already split on CRLF) into a record, by `splitHeaderLine`'s rules. */
export function parseHeaderLines(lines: readonly string[], from: number): HeaderRecord {
  const out: HeaderRecord = {};
  for (let i = from; i < lines.length; i++) {
    const [name, value] = splitHeaderLine(lines[i] as string);
    const key = name.toLowerCase();
    const had = out[key];
    if (had === undefined) out[key] = value;
    else if (Array.isArray(had)) had.push(value);
    else out[key] = [had, value];
  }
  return out;
}
