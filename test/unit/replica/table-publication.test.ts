import { parseModelTable } from '../../../common/model-table.js';
import { DELETION_COST_ANNOTATION, MODELS_ANNOTATION } from '../../../common/names.js';
import { HotnessMeter } from '../../../replica/publication/hotness.js';
import { tablePatch } from '../../../replica/publication/table-publisher.js';
import type { ModelId } from '../../../common/model-id.js';

describe('table publication', () => {
  it('patches the model table and the deletion cost as pod annotations', () => {
    const table = { version: 7, loaded: ['a' as ModelId], loading: ['b' as ModelId], capacity: 3, bytes: 10 };
    const patch = tablePatch(table, 42);
    expect(parseModelTable(patch.metadata.annotations[MODELS_ANNOTATION])).toEqual(table);
    expect(patch.metadata.annotations[DELETION_COST_ANNOTATION]).toBe('42');
  });

  it('makes a hot replica cost more to delete than a cold one, and forgets with time', () => {
    let now = 0;
    const clock = { now: () => now };
    const hot = new HotnessMeter(clock, 60_000);
    const cold = new HotnessMeter(clock, 60_000);
    for (let i = 0; i < 100; i++) hot.hit();
    cold.hit();
    expect(hot.cost()).toBe(100);
    expect(cold.cost()).toBe(1);
    now += 60_000;
    expect(hot.cost()).toBe(37);
    now += 600_000;
    expect(hot.cost()).toBe(0);
  });
});
