import fc from 'fast-check';
import { ModelmuxError } from '../../../common/errors.js';
import { MAX_JSON_NESTING, mayHoldLongInteger, nestingPastLimit, parseJsonBody } from '../../../common/json-body.js';

const bytes = (text: string): Buffer => Buffer.from(text, 'utf8');

/** Levels of arrays and objects in a parsed value: the reference the byte scan must agree with. */
function depthOf(v: unknown): number {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(depthOf));
  if (typeof v === 'object' && v !== null) return 1 + Math.max(0, ...Object.values(v).map(depthOf));
  return 0;
}

function refusal(text: string): ModelmuxError {
  try {
    parseJsonBody(bytes(text));
  } catch (err) {
    if (err instanceof ModelmuxError) return err;
    throw err;
  }
  throw new Error('parsed');
}

describe('nestingPastLimit', () => {
  it('finds the bracket that opens the first level past the limit', () => {
    expect(nestingPastLimit(bytes('[[[]]]'), 3)).toBe(-1);
    expect(nestingPastLimit(bytes('[[[]]]'), 2)).toBe(2);
    expect(nestingPastLimit(bytes('{"a":[{"b":1}]}'), 2)).toBe(6);
    expect(nestingPastLimit(bytes('[1,2,[3]] [[[0]]]'), 2)).toBe(12);
  });

  it('does not count brackets inside strings, escaped quotes and backslashes included', () => {
    expect(nestingPastLimit(bytes('["[[[[", "\\"[[[[", "\\\\", "{{"]'), 1)).toBe(-1);
    expect(nestingPastLimit(bytes('["\\\\", [[1]]]'), 2)).toBe(8);
    expect(nestingPastLimit(bytes('["a\\"b", "]]]]", [[1]]]'), 2)).toBe(18);
    expect(nestingPastLimit(bytes('["unterminated [[[['), 1)).toBe(-1);
  });

  it('agrees with the depth of the parsed value on any JSON', () => {
    const text = fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', 'a', 'é', ' ') });
    const value = fc.letrec((tie) => ({
      node: fc.oneof({ depthSize: 'small', withCrossShrink: true }, fc.integer(), text, fc.constant(null), tie('array'), tie('object')),
      array: fc.array(tie('node'), { maxLength: 4 }),
      object: fc.dictionary(text, tie('node'), { maxKeys: 3 }),
    })).node;
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: 8 }), (v, limit) => {
        expect(nestingPastLimit(bytes(JSON.stringify(v)), limit) === -1).toBe(depthOf(v) <= limit);
      }),
      { seed: 34, numRuns: 2000 },
    );
  });
});

describe('parseJsonBody', () => {
  it(`parses a body ${MAX_JSON_NESTING} levels deep`, () => {
    const text = '['.repeat(MAX_JSON_NESTING) + ']'.repeat(MAX_JSON_NESTING);
    expect(depthOf(parseJsonBody(bytes(text)))).toBe(MAX_JSON_NESTING);
  });

  it.each([
    ['one level past the limit', '['.repeat(MAX_JSON_NESTING + 1) + ']'.repeat(MAX_JSON_NESTING + 1)],
    ['10,000 arrays deep', '['.repeat(10_000) + ']'.repeat(10_000)],
    ['10,000 objects deep', '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000)],
    ['deep after a long flat start', `{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[${'1,'.repeat(5_000)}${'['.repeat(5_000)}]}]}`],
    ['never closed', '['.repeat(100_000)],
  ])('refuses a body nested %s with invalid_request naming the limit', (_case, text) => {
    const e = refusal(text);
    expect(e.code).toBe('invalid_request');
    expect(e.message).toContain(`more than ${MAX_JSON_NESTING} deep`);
  });

  it('reads the bare NaN and ±Infinity tokens Python writes as the strings float tensors take, not inside strings', () => {
    const text = String.raw`{"data":[NaN,Infinity,-Infinity,1.5],"name":"NaN \"Infinity\" -Infinity","big":[-Infinity,9223372036854775807]}`;
    expect(parseJsonBody(bytes(text))).toEqual({ data: ['nan', 'inf', '-inf', 1.5], name: 'NaN "Infinity" -Infinity', big: ['-inf', 9223372036854775807n] });
  });

  it('keeps every integer past 2^53 exact wherever it stands, and takes floats printed with all their digits for no such integer', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }), fc.double({ noNaN: true, noDefaultInfinity: true }))), fc.constantFrom('', ' ', '\n'), (values, gap) => {
        const tokens = values.map((v) => (typeof v === 'bigint' ? v.toString() : JSON.stringify(v)));
        const text = `{"a":${gap}[${tokens.join(`,${gap}`)}]}`;
        const exact = tokens.map((t) => (/^-?\d+$/.test(t) && !Number.isSafeInteger(Number(t)) ? BigInt(t) : Number(t)));
        expect(parseJsonBody(bytes(text))).toEqual({ a: exact });
      }),
    );
    expect(mayHoldLongInteger('12345678901234567')).toBe(true);
    // float32 values as a replica writes them: 17 digits after the point, no integer past 2^53.
    expect(mayHoldLongInteger(JSON.stringify({ outputs: [{ data: [0.30000001192092896, -1.2999999523162842, 142.71428571428572, 1e-7] }] }))).toBe(false);
  });

  it('refuses what is not JSON with invalid_request', () => {
    for (const text of ['{"inputs": [ ', '"unterminated', '', 'nan', '[NaNa]', '[Infinity']) {
      const e = refusal(text);
      expect([e.code, e.message]).toEqual(['invalid_request', 'the body is not valid JSON']);
    }
  });
});
