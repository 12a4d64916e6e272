import { GRPC_TRAILER_NAMES_HEADER, http1AnswerHeaders, splitHttp1Answer } from '../../../common/grpc/grpc-http1-form.js';

describe("the gRPC form's answer head, split back into headers and trailers", () => {
  it("puts the named trailers and the status in the trailers, the rest in the headers, and drops the form's own", () => {
    const raw = [
      'content-type',
      'application/grpc',
      'x-meta',
      'h',
      'x-meta-long',
      'h2',
      GRPC_TRAILER_NAMES_HEADER,
      'x-me,x-meta-long-er,x-t',
      'grpc-status',
      '0',
      'grpc-message',
      '',
      'x-t',
      'one',
      'x-t',
      'two',
      'content-length',
      '5',
      'connection',
      'keep-alive',
      'keep-alive',
      'timeout=5',
      'date',
      'Sun, 06 Dec 2026 03:00:00 GMT',
    ];
    expect(splitHttp1Answer(raw)).toEqual({
      head: ['content-type', 'application/grpc', 'x-meta', 'h', 'x-meta-long', 'h2'],
      trailers: ['grpc-status', '0', 'grpc-message', '', 'x-t', 'one', 'x-t', 'two'],
    });
  });

  it('reads back what the replica writes', () => {
    const written = http1AnswerHeaders({ 'x-h': 'a' }, { 'grpc-status': '5', 'x-code': 'model_not_found' });
    const raw = Object.entries(written).flatMap(([k, v]) => [k, String(v)]);
    expect(splitHttp1Answer(raw)).toEqual({ head: ['x-h', 'a', 'content-type', 'application/grpc'], trailers: ['grpc-status', '5', 'x-code', 'model_not_found'] });
  });

  it('takes only the status as trailers when none are named', () => {
    expect(splitHttp1Answer(['grpc-status', '14', 'x-a', 'b'])).toEqual({ head: ['x-a', 'b'], trailers: ['grpc-status', '14'] });
  });
});
