import { acceptedRequestId } from '../../common/request-id.js';

describe('the request id passed on as given', () => {
  it('takes printable ids of up to 128 characters, the router’s and the replica’s alike', () => {
    for (const id of ['req-42', 'abc@1', 'trace@span=1+2', '0a1b2c3d-4e5f-6789-abcd-ef0123456789', 'x'.repeat(128)]) expect(acceptedRequestId(id)).toBe(id);
  });

  it('refuses ids that could break a log line or are unbounded', () => {
    for (const id of ['', 'a b', 'a\nb', 'a"b', 'x'.repeat(129), 'é']) expect(acceptedRequestId(id)).toBeUndefined();
    expect(acceptedRequestId(undefined)).toBeUndefined();
  });
});
