import { modelIdSchema, parseModelId } from '../../common/model-id.js';

describe('model ids', () => {
  it.each(['1', 'customer-42', 'eu_west.v3', 'a'.repeat(200)])('accepts %s', (id) => {
    expect(parseModelId(id).ok).toBe(true);
  });

  it.each(['', '../etc', 'a/b', '..', 'x\u0000y', 'a\nb', 'a'.repeat(201), 'with space'])('refuses %j', (id) => {
    expect(parseModelId(id).ok).toBe(false);
  });

  it('gives the schema and parseModelId one rule and one reason', () => {
    for (const id of ['m1', '', 'x'.repeat(201), 'a/b', '..', '.', 'a..b', 'é']) {
      const check = parseModelId(id);
      const parsed = modelIdSchema.safeParse(id);
      expect(parsed.success).toBe(check.ok);
      expect(parsed.success ? undefined : parsed.error.issues[0]?.message).toBe(check.ok ? undefined : check.reason);
    }
  });
});
