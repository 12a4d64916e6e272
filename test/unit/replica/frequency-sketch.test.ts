import { FrequencySketch } from '../../../replica/cache/frequency-sketch.js';

describe('FrequencySketch', () => {
  it('counts requests per id and halves every count each window, forgetting ids asked for once', () => {
    const f = new FrequencySketch(10);
    for (let i = 0; i < 6; i++) f.add('hot');
    f.add('warm');
    f.add('warm');
    f.add('once');
    expect([f.count('hot'), f.count('warm'), f.count('once'), f.count('never')]).toEqual([6, 2, 1, 0]);
    f.add('hot'); // the 10th request: halve
    expect([f.count('hot'), f.count('warm'), f.count('once')]).toEqual([3, 1, 0]);
    expect(f.size).toBe(2);
  });
});
