import { idSegment, MAX_MODEL_ID_LENGTH, modelIdSchema, parseModelId } from '../../common/model-id.js';

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

  describe('archive keys, the only ids that may hold "/"', () => {
    it.each(['tenant/7/model.tar.gz', 'a/b.tgz', 'eu_west/v3/m~1.tar.gz', `${'a/'.repeat(93)}x.tar.gz`])('accepts %s', (id) => {
      expect(parseModelId(id).ok).toBe(true);
    });

    it('counts the slashes in the length: at most MAX_MODEL_ID_LENGTH characters in all', () => {
      const key = (n: number): string => `${'a'.repeat(n - 'b/c.tar.gz'.length)}b/c.tar.gz`;
      expect(parseModelId(key(MAX_MODEL_ID_LENGTH)).ok).toBe(true);
      expect(parseModelId(key(MAX_MODEL_ID_LENGTH + 1)).ok).toBe(false);
    });

    it.each([
      ['tenant/7/model', /only an archive key/],
      ['tenant/7/model.tar.gz@2', /only an archive key/],
      ['tenant/7/model.onnx', /only an archive key/],
      ['/abs.tar.gz', /"\/\/"|start or end/],
      ['a//b.tar.gz', /"\/\/"/],
      ['a/.tar.gz/', /only an archive key/],
      ['a/b/.tar.gz/', /only an archive key/],
      ['tenant/../x.tar.gz', /"\.\."/],
      ['../x.tar.gz', /"\.\."/],
      ['./x.tar.gz', /"\." segment/],
      ['a/./x.tar.gz', /"\." segment/],
      ['a/b..c/x.tar.gz', /"\.\."/],
      ['a/b c/x.tar.gz', /only letters/],
      ['a\\b/x.tar.gz', /only letters/],
      ['a/%2F/x.tar.gz', /only letters/],
    ])('refuses %j', (id, reason) => {
      const check = parseModelId(id);
      expect(check.ok ? '' : check.reason).toMatch(reason);
    });

    it('writes an id as one file name or URL segment, "/" as %2F and nothing else changed, so no two ids share a name', () => {
      expect(idSegment('tenant/7/model.tar.gz')).toBe('tenant%2F7%2Fmodel.tar.gz');
      expect(['wine-7', 'wine-7@2', 'a:b+c=d~e', 'x.tar.gz'].map(idSegment)).toEqual(['wine-7', 'wine-7@2', 'a:b+c=d~e', 'x.tar.gz']);
      expect(decodeURIComponent(idSegment('tenant/7/model.tar.gz'))).toBe('tenant/7/model.tar.gz');
      expect(idSegment('tenant/7/model.tar.gz')).not.toContain('/');
    });
  });
});
