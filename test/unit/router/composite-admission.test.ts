import { ModelmuxError } from '../../../common/errors.js';
import { CompositeAdmission, CompositeTicket } from '../../../router/composite/composite-admission.js';

function ticket(a: CompositeAdmission, client: string): CompositeTicket {
  const t = a.admit(client);
  if (t instanceof ModelmuxError) throw t;
  return t;
}

describe('CompositeAdmission', () => {
  it('refuses a client past its composite requests with 429, while another client is admitted', () => {
    const a = new CompositeAdmission({ maxInFlight: 10, maxInFlightPerClient: 2, maxBytesPerClient: 100 });
    const first = ticket(a, '10.0.0.1');
    ticket(a, '10.0.0.1');
    const refused = a.admit('10.0.0.1');
    expect(refused).toBeInstanceOf(ModelmuxError);
    expect((refused as ModelmuxError).code).toBe('composite_client_limit');
    expect((refused as ModelmuxError).status).toBe(429);
    expect((refused as ModelmuxError).message).toMatch(/--composite-max-in-flight-per-client/);
    expect(a.admit('10.0.0.2')).toBeInstanceOf(CompositeTicket);
    first.end();
    first.end(); // ending twice frees one place, not two
    expect(a.inFlight).toBe(2);
    expect(a.admit('10.0.0.1')).toBeInstanceOf(CompositeTicket);
    expect(a.admit('10.0.0.1')).toBeInstanceOf(ModelmuxError);
  });

  it('refuses every client past the router-wide bound with 503 composite_saturated', () => {
    const a = new CompositeAdmission({ maxInFlight: 2, maxInFlightPerClient: 2, maxBytesPerClient: 100 });
    ticket(a, 'a');
    const b = ticket(a, 'b');
    const refused = a.admit('c');
    expect((refused as ModelmuxError).code).toBe('composite_saturated');
    expect((refused as ModelmuxError).status).toBe(503);
    b.end();
    expect(a.admit('c')).toBeInstanceOf(CompositeTicket);
  });

  it("shares one byte allowance among a client's composites, and gives a ticket's bytes back when it ends", () => {
    const a = new CompositeAdmission({ maxInFlight: 10, maxInFlightPerClient: 10, maxBytesPerClient: 100 });
    const one = ticket(a, 'a');
    const two = ticket(a, 'a');
    const other = ticket(a, 'b');
    expect(one.take(60)).toBeUndefined();
    const refused = two.take(41);
    expect(refused?.code).toBe('composite_client_limit');
    expect(refused?.message).toMatch(/would hold 101 bytes .* share of 100 \(--composite-max-bytes-per-client\)/);
    expect(two.bytes).toBe(0);
    expect(other.take(100)).toBeUndefined();
    expect(two.take(40)).toBeUndefined();
    one.release(10);
    expect(a.bytesOf('a')).toBe(90);
    one.end();
    expect(a.bytesOf('a')).toBe(40);
    two.end();
    expect(a.bytesOf('a')).toBe(0);
  });
});
