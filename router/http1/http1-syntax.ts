/** A message that does not follow HTTP/1.1's syntax: the connection cannot be trusted after it. */
export class ProtocolError extends Error {
  readonly code = 'HTTP_PROTOCOL_ERROR';
}

/** RFC 9110 §5.6.2 token characters: what a field name (and a method) may hold. */
export const TOKEN_CHAR = "[!#$%&'*+.^_`|~0-9A-Za-z-]";
/** Field value characters: visible ASCII, obs-text, space and tab (no CR, LF or NUL). */
export const VALUE_CHAR = '[\\t\\x20-\\x7e\\x80-\\xff]';
export const TOKEN = new RegExp(`^${TOKEN_CHAR}+$`);
const FIELD_VALUE = new RegExp(`^${VALUE_CHAR}*$`);
const FIELD_LINE = `${TOKEN_CHAR}+:${VALUE_CHAR}*`;

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
  const value = owsTrimmed(line, colon + 1, line.length);
  if (!FIELD_VALUE.test(value)) throw new ProtocolError('bad header value');
  return [name, value];
}

/**
 * `s` from `start` to `end` without the optional whitespace (spaces and tabs, RFC 9110 §5.6.3)
 * at either end: one slice, where slice-then-trim made two strings per field on the hot path.
 */
function owsTrimmed(s: string, start: number, end: number): string {
  while (start < end && isOws(s.charCodeAt(start))) start++;
  while (end > start && isOws(s.charCodeAt(end - 1))) end--;
  return s.slice(start, end);
}

function isOws(c: number): boolean {
  return c === 32 || c === 9;
}

/**
 * What no head may hold: a control character other than tab, a CR not followed by LF, or an LF
 * without its CR (RFC 9112 §2.2: a recipient may accept a bare LF, llhttp does not). A CR at the
 * very end may meet its LF in the next read.
 */
// eslint-disable-next-line no-control-regex -- control characters are what this pattern finds
const BAD_HEAD_BYTE = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n|$)|(?<!\r)\n/;

/**
 * Whether a head whose blank line has not come yet already holds what no head may. A reader
 * that waits for `\r\n\r\n` would otherwise wait out its head timeout on a head with bare-LF
 * line ends, which llhttp refuses at once.
 */
export function hasBadHeadByte(head: Buffer): boolean {
  return BAD_HEAD_BYTE.test(head.toString('latin1'));
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

/** Every line of a header block as `splitHeaderLine` accepts it (its value untrimmed), CRLF-separated. */
const FIELD_LINES = new RegExp(`^(?:${FIELD_LINE}\\r\\n)*${FIELD_LINE}$`);

/**
 * The fields of a header block (the lines between the start line and the empty line, CRLF
 * between them) as a flat `[name, value, …]`, by `splitHeaderLine`'s rules. One regular
 * expression checks the whole block, so each line costs only its split: on the hot path the
 * two tests per line were a tenth of the parse. A bad block throws at its first bad line.
 */
export function headerFields(block: string): string[] {
  const out: string[] = [];
  if (block === '') return out;
  if (!FIELD_LINES.test(block)) {
    for (const line of block.split('\r\n')) splitHeaderLine(line);
    throw new ProtocolError('malformed header block');
  }
  for (let start = 0; start < block.length;) {
    let eol = block.indexOf('\r\n', start);
    if (eol === -1) eol = block.length;
    const colon = block.indexOf(':', start);
    out.push(block.slice(start, colon), owsTrimmed(block, colon + 1, eol));
    start = eol + 2;
  }
  return out;
}

/** The start of a field line (a name, or a name, a colon and a value, then maybe its CR), or the CR of the blank line. */
const FIELD_LINE_START = new RegExp(`^(?:${TOKEN_CHAR}*|${TOKEN_CHAR}+:${VALUE_CHAR}*\\r?|\\r)$`);

/** Whether `s`, with no CRLF yet, can still become a field line or the blank line after them. */
export function isFieldLineStart(s: string): boolean {
  return FIELD_LINE_START.test(s);
}

/** The first value of field `name` (lowercase) in a flat `[name, value, …]` with lowercased names. */
export function fieldValue(fields: readonly string[], name: string): string | undefined {
  for (let i = 0; i < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}
