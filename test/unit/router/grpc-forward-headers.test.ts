import type { IncomingHttpHeaders } from 'node:http2';
import { HEADER_REQUEST_ID } from '../../../common/names.js';
import { forwardedFields, forwardedHeaders } from '../../../router/grpc/grpc-forward-headers.js';

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
