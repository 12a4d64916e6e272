import { ModelmuxError } from './errors.js';
import { MAX_TENSOR_RANK } from './tensor.js';

/**
 * The deepest a request body may nest JSON arrays and objects. A tensor of the highest rank
 * (MAX_TENSOR_RANK) sits 35 deep in an Open Inference Protocol body (`{"inputs":[{"data":…`);
 * the rest is room for `parameters`. Checked on the bytes before they are parsed: V8 parses
 * deep nesting iteratively but slowly (8 MiB of brackets, 850 ms of CPU, where 8 MB of numbers
 * take 40), and nothing after the parse then walks deeper than this.
 */
export const MAX_JSON_NESTING = MAX_TENSOR_RANK + 8;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** What a byte is to the nesting scan: most bytes of a body (digits, commas) are nothing to it. */
const OTHER = 0;
const STRING = 1;
const OPEN = 2;
const CLOSE = 3;
const BYTE_CLASS = new Uint8Array(256);
BYTE_CLASS[QUOTE] = STRING;
BYTE_CLASS[0x5b] = OPEN; // [
BYTE_CLASS[0x7b] = OPEN; // {
BYTE_CLASS[0x5d] = CLOSE; // ]
BYTE_CLASS[0x7d] = CLOSE; // }

/**
 * The offset of the first bracket that opens level `limit + 1` of `bytes` (JSON text), or -1
 * when it nests no deeper than `limit`. Brackets inside strings do not count; invalid JSON is
 * left to the parser. A step per byte, one table look-up and one test for the bytes that are
 * none of these (a quarter faster than testing each byte against five values: 64 against 84 ms
 * on 22 MB of floats, docs/adr/0051-replica-request-path.md); still about what the parse of
 * a body of numbers costs. Jumping between brackets with `indexOf` was faster on flat data only,
 * and ten times slower on bodies dense with brackets.
 */
export function nestingPastLimit(bytes: Uint8Array, limit: number): number {
  let depth = 0;
  const n = bytes.length;
  for (let i = 0; i < n; i++) {
    const k = BYTE_CLASS[bytes[i] as number];
    if (k === OTHER) continue;
    if (k === STRING) {
      for (i++; i < n; i++) {
        const c = bytes[i];
        if (c === QUOTE) break;
        if (c === BACKSLASH) i++;
      }
    } else if (k === OPEN) {
      if (++depth > limit) return i;
    } else depth--;
  }
  return -1;
}

/**
 * A number whose integer part has sixteen digits or more: one that starts the text or follows
 * what may stand before a JSON number (`[`, `,`, `:`, white space, or its minus sign). Fractions
 * do not match (their digits follow a `.`): a float written with all 17 of its digits, as
 * float32 values printed as doubles are (every float answer of a replica), once made every body
 * and answer take the reviver, 20 times slower than the plain parse. A match inside a string or
 * an exponent only costs that slower parse.
 */
const LONG_INTEGER = /(?:^|[-[,:\s])\d{16}/;

/** Whether `text` (JSON) may hold an integer past 2^53, which only the slower exact parse keeps exact. */
export function mayHoldLongInteger(text: string): boolean {
  return LONG_INTEGER.test(text);
}
const INTEGER = /^-?\d+$/;

/**
 * A JSON.parse reviver that keeps integers past 2^53 exact, as bigints, from their source text
 * (JSON.parse source access, Node 21+): INT64 and UINT64 inputs take every value of their range.
 * Only used when the text may hold such an integer (mayHoldLongInteger), since a reviver makes parsing many times slower.
 */
function exactIntegers(_key: string, value: unknown, context?: { source?: string }): unknown {
  if (typeof value === 'number' && !Number.isSafeInteger(value) && context?.source !== undefined && INTEGER.test(context.source)) return BigInt(context.source);
  return value;
}

/** A JSON string, or a bare NaN/Infinity/-Infinity token outside one. */
const NON_FINITE_TOKEN = /"(?:[^"\\]|\\.)*"|-?Infinity|NaN/g;
const NON_FINITE_STRING: Record<string, string> = { NaN: '"nan"', Infinity: '"inf"', '-Infinity': '"-inf"' };

/**
 * Python's `json` (so `tritonclient.http` and KServe's client in JSON form) writes NaN and ±Inf as
 * the bare tokens `NaN`, `Infinity`, `-Infinity`, which JSON has not: they are read as the strings
 * "nan", "inf", "-inf" that float tensors take. Only tried on a body JSON.parse refused.
 */
function quoteNonFiniteTokens(text: string): string {
  return text.replace(NON_FINITE_TOKEN, (token) => NON_FINITE_STRING[token] ?? token);
}

/** Parses a request body's JSON; 400 `invalid_request` when it nests too deep or is not JSON. */
export function parseJsonBody(bytes: Buffer): unknown {
  const past = nestingPastLimit(bytes, MAX_JSON_NESTING);
  if (past !== -1) {
    throw new ModelmuxError(
      'invalid_request',
      `the body nests arrays and objects more than ${MAX_JSON_NESTING} deep (the limit; at byte ${past}); a tensor may have at most ${MAX_TENSOR_RANK} dimensions`,
    );
  }
  const text = bytes.toString('utf8');
  const parse = (t: string): unknown => (mayHoldLongInteger(t) ? JSON.parse(t, exactIntegers) : JSON.parse(t)) as unknown;
  try {
    return parse(text);
  } catch {
    try {
      if (/NaN|Infinity/.test(text)) return parse(quoteNonFiniteTokens(text));
    } catch {
      // not JSON either way: answered below
    }
    throw new ModelmuxError('invalid_request', 'the body is not valid JSON');
  }
}
