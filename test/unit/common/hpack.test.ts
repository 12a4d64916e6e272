import { HUFFMAN_CODES, HUFFMAN_LENGTHS, huffmanDecode, huffmanDecodedBound } from '../../../common/http2/hpack-huffman.js';
import { encodeHeaderBlock, HpackDecoder, HpackError, type HpackDecoderLimits } from '../../../common/http2/hpack.js';
import { hpackInteger, hpackString, huffmanEncode, literalIndexed, pairs } from '../../helpers/hpack-blocks.js';

const LIMITS: HpackDecoderLimits = { maxTableBytes: 4096, maxHeaderListBytes: 16384, maxFields: 100 };
const hex = (s: string): Buffer => Buffer.from(s, 'hex');
const decoder = (limits: Partial<HpackDecoderLimits> = {}): HpackDecoder => new HpackDecoder({ ...LIMITS, ...limits });
const decodePairs = (d: HpackDecoder, block: Buffer): [string, string][] => pairs(d.decode(block).fields);
const huffmanString = (s: string): string => {
  const coded = huffmanEncode(Buffer.from(s, 'latin1'));
  const out = Buffer.alloc(huffmanDecodedBound(coded.length));
  const n = huffmanDecode(coded, 0, coded.length, out);
  return n < 0 ? '<invalid>' : out.toString('latin1', 0, n);
};
const huffmanBytes = (bytes: number[]): number => {
  const src = Buffer.from(bytes);
  return huffmanDecode(src, 0, src.length, Buffer.alloc(huffmanDecodedBound(src.length)));
};

interface Example {
  section: string;
  title: string;
  tableBytes: number;
  blocks: { hex: string; fields: [string, string][]; table: [string, string][]; tableBytes: number }[];
}

/** RFC 7541 Appendix C.3–C.6, each a series of blocks on one connection, with the table after each. */
const EXAMPLES: Example[] = [
  {
    section: 'C.3',
    title: 'requests without Huffman coding',
    tableBytes: 4096,
    blocks: [
      {
        hex: '828684410f7777772e6578616d706c652e636f6d',
        fields: [
          [':method', 'GET'],
          [':scheme', 'http'],
          [':path', '/'],
          [':authority', 'www.example.com'],
        ],
        table: [[':authority', 'www.example.com']],
        tableBytes: 57,
      },
      {
        hex: '828684be58086e6f2d6361636865',
        fields: [
          [':method', 'GET'],
          [':scheme', 'http'],
          [':path', '/'],
          [':authority', 'www.example.com'],
          ['cache-control', 'no-cache'],
        ],
        table: [
          ['cache-control', 'no-cache'],
          [':authority', 'www.example.com'],
        ],
        tableBytes: 110,
      },
      {
        hex: '828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565',
        fields: [
          [':method', 'GET'],
          [':scheme', 'https'],
          [':path', '/index.html'],
          [':authority', 'www.example.com'],
          ['custom-key', 'custom-value'],
        ],
        table: [
          ['custom-key', 'custom-value'],
          ['cache-control', 'no-cache'],
          [':authority', 'www.example.com'],
        ],
        tableBytes: 164,
      },
    ],
  },
  {
    section: 'C.4',
    title: 'requests with Huffman coding',
    tableBytes: 4096,
    blocks: [
      {
        hex: '828684418cf1e3c2e5f23a6ba0ab90f4ff',
        fields: [
          [':method', 'GET'],
          [':scheme', 'http'],
          [':path', '/'],
          [':authority', 'www.example.com'],
        ],
        table: [[':authority', 'www.example.com']],
        tableBytes: 57,
      },
      {
        hex: '828684be5886a8eb10649cbf',
        fields: [
          [':method', 'GET'],
          [':scheme', 'http'],
          [':path', '/'],
          [':authority', 'www.example.com'],
          ['cache-control', 'no-cache'],
        ],
        table: [
          ['cache-control', 'no-cache'],
          [':authority', 'www.example.com'],
        ],
        tableBytes: 110,
      },
      {
        hex: '828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf',
        fields: [
          [':method', 'GET'],
          [':scheme', 'https'],
          [':path', '/index.html'],
          [':authority', 'www.example.com'],
          ['custom-key', 'custom-value'],
        ],
        table: [
          ['custom-key', 'custom-value'],
          ['cache-control', 'no-cache'],
          [':authority', 'www.example.com'],
        ],
        tableBytes: 164,
      },
    ],
  },
  {
    section: 'C.5',
    title: 'responses without Huffman coding, evicting from a 256-byte table',
    tableBytes: 256,
    blocks: [
      {
        hex: '4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d',
        fields: [
          [':status', '302'],
          ['cache-control', 'private'],
          ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'],
          ['location', 'https://www.example.com'],
        ],
        table: [
          ['location', 'https://www.example.com'],
          ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'],
          ['cache-control', 'private'],
          [':status', '302'],
        ],
        tableBytes: 222,
      },
      {
        hex: '4803333037c1c0bf',
        fields: [
          [':status', '307'],
          ['cache-control', 'private'],
          ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'],
          ['location', 'https://www.example.com'],
        ],
        table: [
          [':status', '307'],
          ['location', 'https://www.example.com'],
          ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'],
          ['cache-control', 'private'],
        ],
        tableBytes: 222,
      },
      {
        hex: '88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b2076657273696f6e3d31',
        fields: [
          [':status', '200'],
          ['cache-control', 'private'],
          ['date', 'Mon, 21 Oct 2013 20:13:22 GMT'],
          ['location', 'https://www.example.com'],
          ['content-encoding', 'gzip'],
          ['set-cookie', 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1'],
        ],
        table: [
          ['set-cookie', 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1'],
          ['content-encoding', 'gzip'],
          ['date', 'Mon, 21 Oct 2013 20:13:22 GMT'],
        ],
        tableBytes: 215,
      },
    ],
  },
  {
    section: 'C.6',
    title: 'responses with Huffman coding, evicting from a 256-byte table',
    tableBytes: 256,
    blocks: [
      {
        hex: '488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3',
        fields: [
          [':status', '302'],
          ['cache-control', 'private'],
          ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'],
          ['location', 'https://www.example.com'],
        ],
        table: [
          ['location', 'https://www.example.com'],
          ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'],
          ['cache-control', 'private'],
          [':status', '302'],
        ],
        tableBytes: 222,
      },
      {
        hex: '4883640effc1c0bf',
        fields: [
          [':status', '307'],
          ['cache-control', 'private'],
          ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'],
          ['location', 'https://www.example.com'],
        ],
        table: [
          [':status', '307'],
          ['location', 'https://www.example.com'],
          ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'],
          ['cache-control', 'private'],
        ],
        tableBytes: 222,
      },
      {
        hex: '88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007',
        fields: [
          [':status', '200'],
          ['cache-control', 'private'],
          ['date', 'Mon, 21 Oct 2013 20:13:22 GMT'],
          ['location', 'https://www.example.com'],
          ['content-encoding', 'gzip'],
          ['set-cookie', 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1'],
        ],
        table: [
          ['set-cookie', 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1'],
          ['content-encoding', 'gzip'],
          ['date', 'Mon, 21 Oct 2013 20:13:22 GMT'],
        ],
        tableBytes: 215,
      },
    ],
  },
];

describe('HPACK decoding of the RFC 7541 examples', () => {
  it.each([
    ['C.2.1 a literal with indexing', '400a637573746f6d2d6b65790d637573746f6d2d686561646572', [['custom-key', 'custom-header']], 55],
    ['C.2.2 a literal without indexing', '040c2f73616d706c652f70617468', [[':path', '/sample/path']], 0],
    ['C.2.3 a literal never indexed', '100870617373776f726406736563726574', [['password', 'secret']], 0],
    ['C.2.4 an indexed field', '82', [[':method', 'GET']], 0],
  ])('decodes %s', (_title, block, fields, tableBytes) => {
    const d = decoder();
    expect(decodePairs(d, hex(block))).toEqual(fields);
    expect(d.dynamicTableBytes).toBe(tableBytes);
  });

  describe.each(EXAMPLES)('$section, $title', ({ tableBytes, blocks }) => {
    it('decodes each block of the series, with the dynamic table and its size after each as the RFC lists them', () => {
      const d = decoder({ maxTableBytes: tableBytes });
      for (const block of blocks) {
        expect(decodePairs(d, hex(block.hex))).toEqual(block.fields);
        expect(d.dynamicTable()).toEqual(block.table);
        expect(d.dynamicTableBytes).toBe(block.tableBytes);
      }
    });
  });
});

describe('the Huffman code of RFC 7541 Appendix B', () => {
  it('is a complete prefix code of 257 symbols (Kraft sum exactly 1)', () => {
    expect(HUFFMAN_CODES).toHaveLength(257);
    expect(HUFFMAN_LENGTHS.reduce((sum, length) => sum + 2 ** -length, 0)).toBe(1);
    HUFFMAN_CODES.forEach((code, i) => expect(code).toBeLessThan(2 ** (HUFFMAN_LENGTHS[i] ?? 0)));
  });

  it('round-trips every byte value, alone and all 256 in one string', () => {
    for (let byte = 0; byte < 256; byte++) expect(huffmanString(String.fromCharCode(byte))).toBe(String.fromCharCode(byte));
    const all = String.fromCharCode(...Array.from({ length: 256 }, (_, i) => i));
    expect(huffmanString(all)).toBe(all);
    expect(huffmanString('')).toBe('');
  });

  it('refuses a string holding EOS', () => {
    // EOS is 30 ones; two more ones pad it to 4 bytes.
    expect(huffmanBytes([0xff, 0xff, 0xff, 0xff])).toBe(-1);
  });

  it('refuses padding longer than 7 bits and padding that is not all ones', () => {
    // 'a' is 00011: 0x1f is 'a' and 3 ones of padding, fine; 0x1f 0xff adds 8 more ones.
    expect(huffmanBytes([0x1f])).toBe(1);
    expect(huffmanBytes([0x1f, 0xff])).toBe(-1);
    expect(huffmanBytes([0xff])).toBe(-1);
    expect(huffmanBytes([0x18])).toBe(-1);
    expect(huffmanBytes([0x1e])).toBe(-1);
  });

  it('makes the decoder throw HpackError on a bad Huffman string', () => {
    const block = Buffer.concat([Buffer.from([0x00, 0x81, 0x1f, 0x81, 0x18])]);
    expect(() => decoder().decode(block)).toThrow(HpackError);
  });
});

describe('HPACK integers', () => {
  it('reads the RFC 7541 C.1 integers: 10 and 1337 in a 5-bit prefix', () => {
    const d = decoder();
    // Size updates carry a 5-bit prefix: 10 (C.1.1), then 1337 (C.1.2: 1f 9a 0a).
    expect(d.decode(Buffer.concat([hex('2a'), hex('3f9a0a')])).fields).toEqual([]);
    d.decode(literalIndexed('k', 'v'.repeat(1337 - 32 - 1)));
    expect(d.dynamicTableBytes).toBe(1337);
    d.decode(literalIndexed('k', 'v'));
    expect(d.dynamicTable()).toEqual([['k', 'v']]);
  });

  it.each([126, 127, 128, 255, 16383, 16384, 70000])('round-trips a string of %i bytes through encoder and decoder', (length) => {
    const value = 'x'.repeat(length);
    expect(decodePairs(decoder({ maxHeaderListBytes: 1 << 20 }), encodeHeaderBlock(['x-long', value]))).toEqual([['x-long', value]]);
  });

  it('accepts zero continuation bytes up to five', () => {
    // 4096 as 3f e1 1f, then 31 + 0 padded with four zero-value continuation bytes.
    expect(decoder().decode(hex('3fe11f')).fields).toEqual([]);
    expect(decoder().decode(hex('3f8080808000')).fields).toEqual([]);
  });

  it('refuses an integer with more than five continuation bytes', () => {
    expect(() => decoder().decode(hex('3f808080808000'))).toThrow(/continuation bytes/);
  });

  it('refuses an integer over 2^31 - 1', () => {
    expect(() => decoder().decode(Buffer.concat([hex('00'), hpackInteger(0, 2 ** 31, 7)]))).toThrow(/over 2\^31/);
    expect(() => decoder().decode(Buffer.concat([hex('00'), hpackInteger(0, 2 ** 31 - 1, 7)]))).toThrow(/runs past/);
  });

  it('refuses a block that ends inside an integer', () => {
    expect(() => decoder().decode(hex('ff'))).toThrow(/ends inside an integer/);
    expect(() => decoder().decode(hex('ff80'))).toThrow(HpackError);
  });
});

describe('HPACK decoding errors', () => {
  it.each([
    ['an indexed field 0', '80', /index 0/],
    ['an index past the static table with an empty dynamic table', 'be', /index 62/],
    ['a name index past the tables', '7f0001', /past the static table/],
    ['a string longer than the rest of the block', '0005616263', /runs past/],
    ['a block that ends before a value', '0000', /ends before a string/],
    ['a block that ends before a name', '40', /ends before a string/],
    ['a size update after a field', '8220', /after the first header field/],
    ['a size update over our SETTINGS_HEADER_TABLE_SIZE', '3fe21f', /over the 4096 allowed/],
  ])('throws HpackError on %s', (_title, block, message) => {
    const d = decoder();
    expect(() => d.decode(hex(block))).toThrow(HpackError);
    expect(() => decoder().decode(hex(block))).toThrow(message);
  });

  it('resolves the index one past the newest entry only once an entry is there', () => {
    const d = decoder();
    expect(() => d.decode(hex('be'))).toThrow(HpackError);
    d.decode(literalIndexed('x-a', '1'));
    expect(decodePairs(d, hex('be'))).toEqual([['x-a', '1']]);
    expect(() => d.decode(hex('bf'))).toThrow(HpackError);
  });
});

describe('HPACK dynamic table sizes', () => {
  it('accepts several size updates at the start of a block and evicts down to each', () => {
    const d = decoder();
    d.decode(Buffer.concat([literalIndexed('x-a', '1'), literalIndexed('x-b', '2')]));
    expect(d.dynamicTableBytes).toBe(72);
    expect(decodePairs(d, Buffer.concat([hex('3f17'), hex('3fe11f'), hex('be')]))).toEqual([['x-b', '2']]);
    expect(d.dynamicTable()).toEqual([['x-b', '2']]);
    d.decode(hex('20'));
    expect(d.dynamicTable()).toEqual([]);
    expect(() => d.decode(hex('be'))).toThrow(HpackError);
  });

  it('keeps the last size update as the limit for later insertions', () => {
    const d = decoder();
    d.decode(hex('3f21'));
    d.decode(Buffer.concat([literalIndexed('x-a', '1'), literalIndexed('x-b', '2')]));
    expect(d.dynamicTable()).toEqual([['x-b', '2']]);
  });

  it('empties the table on an entry larger than the table, adding nothing (RFC 7541 §4.4)', () => {
    const d = decoder({ maxTableBytes: 100 });
    d.decode(literalIndexed('x-a', '1'));
    expect(decodePairs(d, literalIndexed('x-big', 'v'.repeat(100)))).toEqual([['x-big', 'v'.repeat(100)]]);
    expect(d.dynamicTable()).toEqual([]);
    expect(d.dynamicTableBytes).toBe(0);
  });

  it('evicts the oldest entries first, as the ring wraps many times over', () => {
    const d = decoder({ maxTableBytes: 200 });
    for (let i = 0; i < 1000; i++) d.decode(literalIndexed('x-n', String(i % 10)));
    // Each entry is 3 + 1 + 32 = 36 bytes: five fit in 200.
    expect(d.dynamicTable()).toEqual(['9', '8', '7', '6', '5'].map((v) => ['x-n', v]));
    expect(decodePairs(d, hex('c2be'))).toEqual([
      ['x-n', '5'],
      ['x-n', '9'],
    ]);
  });
});

describe('HPACK limits', () => {
  it('refuses an HPACK bomb of indices to a 4 KiB entry without collecting it, and the table stays in sync', () => {
    const d = decoder({ maxHeaderListBytes: 16384 });
    const big = 'b'.repeat(4000);
    d.decode(literalIndexed('x-big', big));
    const bomb = Buffer.concat([Buffer.alloc(10_000, 0xbe), literalIndexed('x-after', 'ok')]);
    expect(d.decode(bomb)).toEqual({ fields: [], tooLarge: true });
    expect(decodePairs(d, hex('bebf'))).toEqual([
      ['x-after', 'ok'],
      ['x-big', big],
    ]);
  });

  it('counts name + value + 32 per field against maxHeaderListBytes', () => {
    const d = decoder({ maxHeaderListBytes: 3 * (3 + 1 + 32) });
    const field = (v: string): Buffer => Buffer.concat([hex('00'), hpackString('x-a'), hpackString(v)]);
    expect(d.decode(Buffer.concat([field('1'), field('2'), field('3')])).tooLarge).toBe(false);
    expect(d.decode(Buffer.concat([field('1'), field('2'), field('34')])).tooLarge).toBe(true);
  });

  it('accepts maxFields fields and refuses one more, decoding the next block', () => {
    const d = decoder({ maxFields: 3 });
    expect(d.decode(hex('828684')).fields).toHaveLength(6);
    expect(d.decode(hex('82868487'))).toEqual({ fields: [], tooLarge: true });
    expect(decodePairs(d, hex('82'))).toEqual([[':method', 'GET']]);
  });
});

describe('HPACK strings', () => {
  it('returns upper-case names as received, for the caller to refuse the stream', () => {
    expect(decodePairs(decoder(), Buffer.concat([hex('00'), hpackString('X-Up'), hpackString('v')]))).toEqual([['X-Up', 'v']]);
  });

  it('returns bytes 0x80–0xff of a value as latin1 characters, raw and Huffman-coded', () => {
    const value = '\x80caf\xe9\xff';
    const block = Buffer.concat([hex('00'), hpackString('x-a'), hpackString(value), hex('00'), hpackString('x-b'), hpackString(value, true)]);
    expect(decodePairs(decoder(), block)).toEqual([
      ['x-a', value],
      ['x-b', value],
    ]);
  });
});

describe('HPACK encoding of responses', () => {
  it('encodes :status 200 as static index 8 and a static name with its index', () => {
    expect(encodeHeaderBlock([':status', '200'])).toEqual(hex('88'));
    expect(encodeHeaderBlock(['content-type', 'application/grpc'])).toEqual(Buffer.concat([hex('0f10'), hpackString('application/grpc')]));
    expect(encodeHeaderBlock(['grpc-status', '0'])).toEqual(Buffer.concat([hex('00'), hpackString('grpc-status'), hpackString('0')]));
  });

  it('round-trips fields through the decoder without adding to its table', () => {
    const fields = [':status', '200', 'content-type', 'application/grpc', 'grpc-status', '0', 'grpc-message', 'caf\xe9', ':status', '404', 'x-empty', ''];
    const d = decoder();
    expect(d.decode(encodeHeaderBlock(fields)).fields).toEqual(fields);
    expect(d.dynamicTable()).toEqual([]);
  });

  it('writes names and values of any length as raw latin1 literals, bytes 0x80–0xff included', () => {
    const latin1 = Array.from({ length: 256 }, (_, i) => String.fromCharCode(i)).join('');
    const fields: string[] = [];
    for (const n of [1, 63, 64, 65, 200]) fields.push(`x-${'n'.repeat(n)}`, latin1.slice(256 - n).padStart(n, 'v'));
    const block = encodeHeaderBlock(fields);
    expect(decoder().decode(block).fields).toEqual(fields);
    // Byte for byte: each a literal without indexing, its name new, both raw latin1.
    const expected = Buffer.concat(fields.flatMap((f, i) => (i % 2 === 0 ? [hex('00'), hpackString(f)] : [hpackString(f)])));
    expect(block).toEqual(expected);
  });
});
