import { ByteBudget } from '../../../common/byte-budget.js';
import { ResponseBacklog } from '../../../router/exchange/response-backlog.js';

describe('ByteBudget', () => {
  it('takes bytes only while they fit, counts bytes in hand past the limit, and gives them back', () => {
    const b = new ByteBudget(100);
    expect(b.take(60)).toBe(true);
    expect(b.take(50)).toBe(false);
    expect(b.used).toBe(60);
    expect(b.available).toBe(40);
    b.add(50);
    expect(b.used).toBe(110);
    expect(b.full).toBe(true);
    expect(b.available).toBe(0);
    b.release(110);
    expect(b.used).toBe(0);
    expect(b.take(100)).toBe(true);
    expect(b.full).toBe(true);
  });
});

describe('ResponseBacklog', () => {
  it('counts nothing while the client keeps up', () => {
    const budget = new ByteBudget(1000);
    const b = new ResponseBacklog(budget, 100);
    expect(b.wrote(500, true)).toBe(false);
    expect(b.isBehind).toBe(false);
    expect(budget.used).toBe(0);
  });

  it('counts what is written after the first write the client did not take, and pauses past the answer bound', () => {
    const budget = new ByteBudget(1000);
    const b = new ResponseBacklog(budget, 100);
    // The write that found the queue full is not counted: at most one read of the replica's.
    expect(b.wrote(64, false)).toBe(false);
    expect(b.isBehind).toBe(true);
    expect(budget.used).toBe(0);
    expect(b.wrote(60, false)).toBe(false);
    expect(b.wrote(60, false)).toBe(true);
    expect(b.bytes).toBe(120);
    expect(budget.used).toBe(120);
    b.drained();
    expect(b.isBehind).toBe(false);
    expect(budget.used).toBe(0);
    expect(b.wrote(10, true)).toBe(false);
  });

  it("pauses at the router's bound for all answers too, whatever this answer holds", () => {
    const budget = new ByteBudget(100);
    expect(budget.take(90)).toBe(true);
    const b = new ResponseBacklog(budget, 1_000_000);
    b.wrote(1, false);
    expect(b.wrote(20, false)).toBe(true);
    expect(budget.used).toBe(110);
    b.drained();
    expect(budget.used).toBe(90);
  });
});
