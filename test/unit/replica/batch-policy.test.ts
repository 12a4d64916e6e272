import { BatchQueue, IDLE_GROUP_MS } from '../../../replica/onnx/batch-policy.js';

describe('batch policy', () => {
  it('runs a request alone at once when batching is off', () => {
    const opts = { maxBatchSize: 1, batchWaitMs: 100 };
    const q = new BatchQueue<string>();
    expect(q.add('m', 'r1', 0, opts)).toEqual({ key: 'm', items: ['r1'] });
    expect(q.size).toBe(0);
  });

  it('closes a batch as soon as it is full', () => {
    const opts = { maxBatchSize: 3, batchWaitMs: 1000 };
    const q = new BatchQueue<number>();
    expect(q.add('m', 1, 0, opts)).toBeUndefined();
    expect(q.add('m', 2, 1, opts)).toBeUndefined();
    expect(q.add('m', 3, 2, opts)).toEqual({ key: 'm', items: [1, 2, 3] });
    expect(q.nextDeadline()).toBeUndefined();
  });

  it('keeps the options of each model', () => {
    const q = new BatchQueue<string>();
    q.add('a', 'a1', 0, { maxBatchSize: 2, batchWaitMs: 10 });
    q.add('b', 'b1', 0, { maxBatchSize: 3, batchWaitMs: 50 });
    expect(q.add('b', 'b2', 1, { maxBatchSize: 3, batchWaitMs: 50 })).toBeUndefined();
    expect(q.nextDeadline()).toBe(10);
    expect(q.takeDue(10)).toEqual([{ key: 'a', items: ['a1'] }]);
    expect(q.add('b', 'b3', 2, { maxBatchSize: 3, batchWaitMs: 50 })).toEqual({ key: 'b', items: ['b1', 'b2', 'b3'] });
  });

  it('never mixes keys (models) in one batch', () => {
    const opts = { maxBatchSize: 2, batchWaitMs: 1000 };
    const q = new BatchQueue<string>();
    expect(q.add('a', 'a1', 0, opts)).toBeUndefined();
    expect(q.add('b', 'b1', 0, opts)).toBeUndefined();
    expect(q.add('a', 'a2', 0, opts)).toEqual({ key: 'a', items: ['a1', 'a2'] });
    expect(q.takeDue(1000)).toEqual([{ key: 'b', items: ['b1'] }]);
  });

  it('releases a partial batch once its oldest request has waited batchWaitMs', () => {
    const opts = { maxBatchSize: 8, batchWaitMs: 100 };
    const q = new BatchQueue<string>();
    q.add('a', 'a1', 10, opts);
    q.add('b', 'b1', 50, opts);
    q.add('a', 'a2', 60, opts);
    expect(q.nextDeadline()).toBe(110);
    expect(q.takeDue(109)).toEqual([]);
    expect(q.takeDue(110)).toEqual([{ key: 'a', items: ['a1', 'a2'] }]);
    expect(q.nextDeadline()).toBe(150);
    expect(q.takeDue(150)).toEqual([{ key: 'b', items: ['b1'] }]);
    expect(q.size).toBe(0);
  });

  it('with no wait, batches only what arrives before the next turn', () => {
    const opts = { maxBatchSize: 8, batchWaitMs: 0 };
    const q = new BatchQueue<string>();
    q.add('a', 'a1', 5, opts);
    q.add('a', 'a2', 5, opts);
    expect(q.nextDeadline()).toBe(5);
    expect(q.takeDue(5)).toEqual([{ key: 'a', items: ['a1', 'a2'] }]);
  });

  it("keeps each model's group between its batches, and lets groups idle for IDLE_GROUP_MS go when a new model comes", () => {
    const opts = { maxBatchSize: 2, batchWaitMs: 10 };
    const q = new BatchQueue<string>();
    q.add('a', 'a1', 0, opts);
    expect(q.add('a', 'a2', 1, opts)).toEqual({ key: 'a', items: ['a1', 'a2'] });
    q.add('b', 'b1', 5, opts);
    expect(q.takeDue(15)).toEqual([{ key: 'b', items: ['b1'] }]);
    expect({ size: q.size, groups: q.groupCount, next: q.nextDeadline() }).toEqual({ size: 0, groups: 2, next: undefined });
    // A group reused after its batch waits from its new first request, with that request's options.
    expect(q.add('a', 'a3', 100, { maxBatchSize: 3, batchWaitMs: 50 })).toBeUndefined();
    expect(q.nextDeadline()).toBe(150);
    expect(q.takeDue(149)).toEqual([]);
    expect(q.takeDue(150)).toEqual([{ key: 'a', items: ['a3'] }]);
    // b has been empty since 15, a since 150: a new key drops only what has idled IDLE_GROUP_MS.
    q.add('c', 'c1', 15 + IDLE_GROUP_MS, opts);
    expect(q.groupCount).toBe(2);
    expect(q.takeDue(15 + IDLE_GROUP_MS + 10)).toEqual([{ key: 'c', items: ['c1'] }]);
  });
});
