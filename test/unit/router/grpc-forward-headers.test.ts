import type { IncomingHttpHeaders } from 'node:http2';
import { headersOf, responseFields } from '../../../common/http2/header-fields.js';
import { HEADER_BACKEND, HEADER_REQUEST_ID } from '../../../common/names.js';
import { answerFields, forwardedFields, forwardedHeaders, passedFields, statusOf, upstreamError } from '../../../router/grpc/grpc-forward-headers.js';
import { fieldValue } from '../../../router/http1/http1-syntax.js';

describe("the HTTP/1.1 form's request header list", () => {
  const incoming: IncomingHttpHeaders = {
    ':method': 'POST',
    ':path': '/inference.GRPCInferenceService/ModelInfer',
    ':authority': 'router:8001',
    'content-type': 'application/grpc+proto',
    te: 'trailers',
    'grpc-timeout': '5S',
    'user-agent': 'grpc-node-js/1.0',
    [HEADER_REQUEST_ID]: 'given',
    'x-forwarded-for': '10.0.0.1',
    'x-team': 'fraud',
    'x-tag': ['a', 'b'],
    'trace-bin': 'AAEC',
  };

  it('carries every header of the HTTP/2 object but its pseudo-headers and te, in its order', () => {
    const object = forwardedHeaders(incoming, '/inference.GRPCInferenceService/ModelInfer', 'req-7', '127.0.0.9');
    const expected: string[] = [];
    for (const [key, value] of Object.entries(object)) {
      if (key.startsWith(':') || key === 'te' || value === undefined) continue;
      if (Array.isArray(value)) for (const v of value) expected.push(key, v);
      else expected.push(key, String(value));
    }
    expect(forwardedFields(incoming, 'req-7', '127.0.0.9')).toEqual(expected);
  });

  it("appends the client's address to x-forwarded-for and writes the router's request id", () => {
    const fields = forwardedFields(incoming, 'req-7', '127.0.0.9');
    const pairs = new Map<string, string[]>();
    for (let i = 0; i < fields.length; i += 2) pairs.set(fields[i] as string, [...(pairs.get(fields[i] as string) ?? []), fields[i + 1] as string]);
    expect(pairs.get('x-forwarded-for')).toEqual(['10.0.0.1, 127.0.0.9']);
    expect(pairs.get(HEADER_REQUEST_ID)).toEqual(['req-7']);
    expect(pairs.get('content-type')).toEqual(['application/grpc']);
    expect(pairs.get('x-tag')).toEqual(['a', 'b']);
    expect(pairs.has('grpc-timeout') || pairs.has('user-agent') || pairs.has('te')).toBe(false);
  });
});

describe("an answer's fields, as names and values", () => {
  const head = [
    ':status',
    '200',
    'content-type',
    'application/grpc',
    'date',
    'x',
    'grpc-encoding',
    'identity',
    'x-meta',
    'a',
    'x-meta',
    'b',
    HEADER_REQUEST_ID,
    'replica-given',
    HEADER_BACKEND,
    'theirs',
  ];

  it("keeps the replica's metadata in order, both values of a name given twice, and writes the router's request id", () => {
    expect(answerFields(head, 'req-1', undefined)).toEqual(['x-meta', 'a', 'x-meta', 'b', HEADER_BACKEND, 'theirs', HEADER_REQUEST_ID, 'req-1']);
  });

  it("puts a split's backend in place of the replica's", () => {
    expect(answerFields(head, 'req-1', 'fraud-v2')).toEqual(['x-meta', 'a', 'x-meta', 'b', HEADER_REQUEST_ID, 'req-1', HEADER_BACKEND, 'fraud-v2']);
  });

  it('passes every trailer but the pseudo-headers and the connection’s own', () => {
    expect(passedFields([':status', '200', 'content-type', 'application/grpc', 'date', 'x', 'grpc-status', '0', 'x-t', '1'])).toEqual(['grpc-status', '0', 'x-t', '1']);
  });

  it("reads a status and its catalogue code from the trailers' first values", () => {
    const trailers = ['grpc-status', '14', 'grpc-message', 'no%20slot', 'x-modelmux-error-code', 'overloaded', 'grpc-status', '0'];
    expect(statusOf(trailers)).toEqual({ code: 14, details: 'no slot', errorCode: 'overloaded' });
    expect(upstreamError(trailers, 'no slot')).toEqual({ code: 'overloaded', refused: false });
    expect(statusOf(['grpc-status', 'x'])).toMatchObject({ code: 2, details: '' });
    expect(fieldValue(trailers, 'grpc-status')).toBe('14');
    expect(fieldValue(trailers, 'absent')).toBeUndefined();
  });

  it('turns HTTP/2 header objects into fields and back, a repeated name as an array', () => {
    const fields = responseFields({ ':status': '200', 'x-a': ['1', '2'], 'x-b': '3' });
    expect(fields).toEqual([':status', '200', 'x-a', '1', 'x-a', '2', 'x-b', '3']);
    expect(headersOf(fields)).toEqual({ ':status': '200', 'x-a': ['1', '2'], 'x-b': '3' });
  });
});
