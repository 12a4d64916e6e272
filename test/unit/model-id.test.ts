import { modelIdSchema, parseModelId } from '../../common/model-id.js';

describe('model ids', () => {
  it.each(['1', 'customer-42', 'eu_west.v3', 'a'.repeat(200)])('accepts %s', (id) => {
    expect(parseModelId(id).ok).toBe(true);
  });

  it.each(['', '../etc', 'a/b', '..', 'x\u0000y', 'a\nb', 'a'.repeat(201), 'with space'])('refuses %j', (id) => {
    expect(parseModelId(id).ok).toBe(false);
  });

  it.each(['wine-7@1', 'wine-7@0', 'wine-7@007', `m@${'9'.repeat(18)}`, 'a:b@2'])('accepts the version id %s', (id) => {
    expect(parseModelId(id).ok).toBe(true);
  });

  it.each(['@', '@1', 'm@', 'm@x', 'm@1.0', 'm@-1', 'm@1@2', 'm@@1', `m@${'9'.repeat(19)}`, '.@1', 'a@b@1'])('refuses %j: "@" only introduces a version of digits', (id) => {
    const check = parseModelId(id);
    expect(check.ok).toBe(false);
    expect(check.ok ? '' : check.reason).toMatch(/version/);
  });

  it('gives the schema and parseModelId one rule and one reason', () => {
    for (const id of ['m1', '', 'x'.repeat(201), 'a/b', '..', '.', 'a..b', 'é', 'm@1', 'm@x']) {
      const check = parseModelId(id);
      const parsed = modelIdSchema.safeParse(id);
      expect(parsed.success).toBe(check.ok);
      expect(parsed.success ? undefined : parsed.error.issues[0]?.message).toBe(check.ok ? undefined : check.reason);
    }
  });
});
