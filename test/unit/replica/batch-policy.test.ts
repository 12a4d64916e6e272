import { BatchQueue } from '../../../replica/batch-policy.js';

describe('batch policy', () => {
  it('runs a request alone at once when batching is off', () => {
    const q = new BatchQueue<string>({ maxBatchSize: 1, batchWaitMs: 100 });
    expect(q.add('m', 'r1', 0)).toEqual({ key: 'm', items: ['r1'] });
    expect(q.size).toBe(0);
  });

  it('closes a batch as soon as it is full', () => {
    const q = new BatchQueue<number>({ maxBatchSize: 3, batchWaitMs: 1000 });
    expect(q.add('m', 1, 0)).toBeUndefined();
    expect(q.add('m', 2, 1)).toBeUndefined();
    expect(q.add('m', 3, 2)).toEqual({ key: 'm', items: [1, 2, 3] });
    expect(q.nextDeadline()).toBeUndefined();
  });

  it('never mixes keys (models) in one batch', () => {
    const q = new BatchQueue<string>({ maxBatchSize: 2, batchWaitMs: 1000 });
    expect(q.add('a', 'a1', 0)).toBeUndefined();
    expect(q.add('b', 'b1', 0)).toBeUndefined();
    expect(q.add('a', 'a2', 0)).toEqual({ key: 'a', items: ['a1', 'a2'] });
    expect(q.takeDue(1000)).toEqual([{ key: 'b', items: ['b1'] }]);
  });

  it('releases a partial batch once its oldest request has waited batchWaitMs', () => {
    const q = new BatchQueue<string>({ maxBatchSize: 8, batchWaitMs: 100 });
    q.add('a', 'a1', 10);
    q.add('b', 'b1', 50);
    q.add('a', 'a2', 60);
    expect(q.nextDeadline()).toBe(110);
    expect(q.takeDue(109)).toEqual([]);
    expect(q.takeDue(110)).toEqual([{ key: 'a', items: ['a1', 'a2'] }]);
    expect(q.nextDeadline()).toBe(150);
    expect(q.takeDue(150)).toEqual([{ key: 'b', items: ['b1'] }]);
    expect(q.size).toBe(0);
  });

  it('with no wait, batches only what arrives before the next turn', () => {
    const q = new BatchQueue<string>({ maxBatchSize: 8, batchWaitMs: 0 });
    q.add('a', 'a1', 5);
    q.add('a', 'a2', 5);
    expect(q.nextDeadline()).toBe(5);
    expect(q.takeDue(5)).toEqual([{ key: 'a', items: ['a1', 'a2'] }]);
  });
});
