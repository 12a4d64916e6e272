import { parseModelId } from '../../common/model-id.js';

describe('model ids', () => {
  it.each(['1', 'customer-42', 'eu_west.v3', 'a'.repeat(200)])('accepts %s', (id) => {
    expect(parseModelId(id).ok).toBe(true);
  });

  it.each(['', '../etc', 'a/b', '..', 'x\u0000y', 'a\nb', 'a'.repeat(201), 'with space'])('refuses %j', (id) => {
    expect(parseModelId(id).ok).toBe(false);
  });
});
