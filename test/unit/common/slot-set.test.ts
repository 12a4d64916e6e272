import { SlotSet } from '../../../common/slot-set.js';

interface Member {
  name: string;
  slot: number;
  other: number;
}
const member = (name: string): Member => ({ name, slot: -1, other: -1 });
const names = (members: Member[]): string[] => members.map((m) => m.name).sort();

describe('SlotSet', () => {
  it('holds each member once, and takes out exactly the member deleted, wherever it sits', () => {
    const set = new SlotSet<'slot', Member>('slot');
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map(member) as [Member, Member, Member, Member];
    for (const m of [a, b, c, d, b]) set.add(m);
    expect(set.size).toBe(4);
    expect(set.delete(b)).toBe(true);
    expect(set.delete(b)).toBe(false);
    expect([set.has(a), set.has(b), set.has(c), set.has(d)]).toEqual([true, false, true, true]);
    expect(names(set.values())).toEqual(['a', 'c', 'd']);
    // The last member moved into b's place: deleting it and the first still finds each.
    expect(set.delete(d)).toBe(true);
    expect(set.delete(a)).toBe(true);
    expect(names(set.values())).toEqual(['c']);
    set.add(b);
    expect(names(set.values())).toEqual(['b', 'c']);
  });

  it('keeps two sets of the same members apart when each names its own field', () => {
    const one = new SlotSet<'slot', Member>('slot');
    const two = new SlotSet<'other', Member>('other');
    const ms = ['a', 'b', 'c'].map(member);
    for (const m of ms) one.add(m);
    for (const m of [...ms].reverse()) two.add(m);
    one.delete(ms[0] as Member);
    expect(names(one.values())).toEqual(['b', 'c']);
    expect(names(two.values())).toEqual(['a', 'b', 'c']);
    expect(two.has(ms[0] as Member)).toBe(true);
  });

  it('does not take a member of another set, or a stranger whose field points at a member, for its own', () => {
    const set = new SlotSet<'slot', Member>('slot');
    const a = member('a');
    set.add(a);
    const stranger = { ...member('x'), slot: 0 };
    expect(set.has(stranger)).toBe(false);
    expect(set.delete(stranger)).toBe(false);
    expect(set.size).toBe(1);
  });

  it('visits the members it has when asked, skipping those an earlier visit removed and not those added meanwhile', () => {
    const set = new SlotSet<'slot', Member>('slot');
    const [a, b, c] = ['a', 'b', 'c'].map(member) as [Member, Member, Member];
    for (const m of [a, b, c]) set.add(m);
    const late = member('late');
    const visited: string[] = [];
    set.forEach((m) => {
      visited.push(m.name);
      if (m === a) {
        set.delete(b);
        set.delete(c);
        set.add(c);
        set.add(late);
      }
    });
    // b left for good; c left and came back before its turn, so it is visited; late came during the visits.
    expect(visited).toEqual(['a', 'c']);
    expect(names(set.values())).toEqual(['a', 'c', 'late']);
  });

  it('gives a copy that changing the set does not touch', () => {
    const set = new SlotSet<'slot', Member>('slot');
    const ms = ['a', 'b', 'c'].map(member);
    for (const m of ms) set.add(m);
    const seen = set.values();
    for (const m of seen) set.delete(m);
    expect(seen.map((m) => m.name)).toEqual(['a', 'b', 'c']);
    expect(set.size).toBe(0);
  });
});
