import type { ModelId } from '../../../common/model-id.js';
import { VersionLists } from '../../../replica/store/version-lists.js';

function harness(ttlMs = 1000, maxEntries = 10) {
  let now = 0;
  const asked: string[] = [];
  const answers = new Map<string, string[] | Error>();
  const lists = new VersionLists(
    (base) => {
      asked.push(base);
      const a = answers.get(base) ?? [];
      return a instanceof Error ? Promise.reject(a) : Promise.resolve(a);
    },
    { now: () => now },
    ttlMs,
    maxEntries,
  );
  return { lists, asked, answers, advance: (ms: number) => (now += ms) };
}

const id = (s: string): ModelId => s as ModelId;

describe('VersionLists', () => {
  it('answers in numeric order and asks the store again only after the ttl', async () => {
    const h = harness();
    h.answers.set('m', ['10', '2', '1']);
    expect(await h.lists.get(id('m'))).toEqual(['1', '2', '10']);
    h.answers.set('m', ['1', '2', '10', '11']);
    h.advance(999);
    expect(await h.lists.get(id('m'))).toEqual(['1', '2', '10']);
    h.advance(1);
    expect(await h.lists.get(id('m'))).toEqual(['1', '2', '10', '11']);
    expect(h.asked).toEqual(['m', 'm']);
  });

  it('shares one listing between concurrent asks', async () => {
    const h = harness();
    h.answers.set('m', ['1']);
    const [a, b] = await Promise.all([h.lists.get(id('m')), h.lists.get(id('m'))]);
    expect(a).toEqual(['1']);
    expect(b).toEqual(['1']);
    expect(h.asked).toEqual(['m']);
  });

  it('does not keep a failed listing', async () => {
    const h = harness();
    h.answers.set('m', new Error('store down'));
    await expect(h.lists.get(id('m'))).rejects.toThrow('store down');
    h.answers.set('m', ['3']);
    expect(await h.lists.get(id('m'))).toEqual(['3']);
    expect(h.asked).toEqual(['m', 'm']);
  });

  it('remembers at most maxEntries models, forgetting the oldest listing', async () => {
    const h = harness(1000, 2);
    for (const m of ['a', 'b', 'c']) await h.lists.get(id(m));
    await h.lists.get(id('c'));
    await h.lists.get(id('b'));
    await h.lists.get(id('a'));
    expect(h.asked).toEqual(['a', 'b', 'c', 'a']);
  });
});
