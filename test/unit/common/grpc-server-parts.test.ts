import { messagePrefix, UnaryMessageReader } from '../../../common/grpc/grpc-frame.js';
import { grpcTimeoutMs } from '../../../common/grpc/grpc-timeout.js';
import { ResetBudget } from '../../../common/grpc/reset-budget.js';

const framed = (message: Buffer): Buffer => Buffer.concat([messagePrefix(message.length), message]);

describe('UnaryMessageReader', () => {
  it('takes a message in any chunks, prefix split included, and holds what came, with its prefix as it came', () => {
    const message = Buffer.from('hello, replica');
    const bytes = framed(message);
    for (let cut = 1; cut < bytes.length; cut++) {
      const r = new UnaryMessageReader(100);
      expect(r.push(bytes.subarray(0, cut)).kind).toBe('partial');
      expect(r.held).toBe(cut);
      const s = r.push(bytes.subarray(cut));
      expect(s).toEqual({ kind: 'complete', message, framed: bytes });
    }
  });

  it('refuses a message past the limit from its prefix, before its bytes come', () => {
    const r = new UnaryMessageReader(1000);
    expect(r.push(messagePrefix(1001))).toEqual({ kind: 'refused', reason: 'too_large', length: 1001 });
    expect(new UnaryMessageReader(1000).push(messagePrefix(1000)).kind).toBe('partial');
  });

  it('refuses a compressed message and bytes after the one message of a unary call', () => {
    const compressed = framed(Buffer.from('x'));
    compressed[0] = 1;
    expect(new UnaryMessageReader(10).push(compressed)).toMatchObject({ kind: 'refused', reason: 'compressed' });
    expect(new UnaryMessageReader(10).push(Buffer.concat([framed(Buffer.from('a')), Buffer.from([0])]))).toMatchObject({ kind: 'refused', reason: 'trailing_bytes' });
    const r = new UnaryMessageReader(10);
    expect(r.push(framed(Buffer.from('a'))).kind).toBe('complete');
    expect(r.push(Buffer.from([0]))).toMatchObject({ kind: 'refused', reason: 'trailing_bytes' });
  });

  it('takes an empty message (an empty request, as ServerLive sends)', () => {
    expect(new UnaryMessageReader(10).push(messagePrefix(0))).toEqual({ kind: 'complete', message: Buffer.alloc(0), framed: messagePrefix(0) });
  });
});

describe('grpcTimeoutMs', () => {
  it('reads each unit of the grpc-timeout header', () => {
    expect(grpcTimeoutMs('1H')).toBe(3_600_000);
    expect(grpcTimeoutMs('2M')).toBe(120_000);
    expect(grpcTimeoutMs('3S')).toBe(3000);
    expect(grpcTimeoutMs('250m')).toBe(250);
    expect(grpcTimeoutMs('1500u')).toBeCloseTo(1.5);
    expect(grpcTimeoutMs('99999999n')).toBeCloseTo(99.999999);
  });

  it('refuses a malformed one: no unit, too many digits, a sign or a fraction', () => {
    for (const bad of ['10', '123456789S', '-1S', '1.5S', 'S', '']) expect(grpcTimeoutMs(bad)).toBeUndefined();
  });
});

describe('ResetBudget', () => {
  it('cuts off a client past its resets when they are most of its calls, for one window', () => {
    let now = 0;
    const b = new ResetBudget({ maxResets: 3, windowMs: 1000 }, () => now);
    for (let i = 0; i < 4; i++) b.called('a');
    expect([b.reset('a'), b.reset('a'), b.reset('a')]).toEqual([false, false, false]);
    expect(b.reset('a')).toBe(true);
    // Told once: the connections are closed then, and new ones refused while blocked.
    expect(b.reset('a')).toBe(false);
    expect(b.blocked('a')).toBe(true);
    expect(b.blocked('b')).toBe(false);
    now = 999;
    b.forget('a');
    expect(b.blocked('a')).toBe(true);
    now = 1500;
    expect(b.blocked('a')).toBe(false);
  });

  it('spares a busy client whose resets are a minority of its calls, and counts each window anew', () => {
    let now = 0;
    const b = new ResetBudget({ maxResets: 3, windowMs: 1000 }, () => now);
    for (let i = 0; i < 100; i++) b.called('busy');
    for (let i = 0; i < 40; i++) expect(b.reset('busy')).toBe(false);
    now = 1000;
    for (let i = 0; i < 3; i++) expect(b.reset('busy')).toBe(false);
    b.forget('busy');
    expect(b.size).toBe(0);
  });

  it('budgets nothing with a limit of 0', () => {
    const b = new ResetBudget({ maxResets: 0, windowMs: 1000 }, () => 0);
    for (let i = 0; i < 100; i++) expect(b.reset('a')).toBe(false);
    expect(b.size).toBe(0);
  });
});
