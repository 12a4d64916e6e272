import { REQUEST_ID } from '../../../common/request-id.js';
import { RequestIds } from '../../../router/exchange/request-id.js';

describe('RequestIds', () => {
  it('gives unique ids within a process and different ones in another, all passing the accepted id pattern', () => {
    const a = new RequestIds();
    const b = new RequestIds();
    const ids = Array.from({ length: 10_000 }, () => a.next());
    expect(new Set(ids).size).toBe(ids.length);
    // What the router passes on as given: an id it made survives the next router's check.
    for (const id of ids.slice(0, 100)) expect(id).toMatch(REQUEST_ID);
    expect(b.next().split('-')[0]).not.toBe(ids[0]?.split('-')[0]);
    expect(ids[0]).toMatch(/^[0-9a-f]{16}-1$/);
  });
});
