import { ModelmuxError } from '../../../common/errors.js';
import { MemberSlots } from '../../../router/composite/member-slots.js';

describe('MemberSlots', () => {
  it('runs at most maxInFlight members at once, the others in the order they were asked for as places free', () => {
    const slots = new MemberSlots(10, 2);
    const started: string[] = [];
    const ends = new Map<string, () => void>();
    for (const name of ['a', 'b', 'c', 'd'])
      ends.set(
        name,
        slots.add(() => started.push(name)),
      );
    expect(started).toEqual(['a', 'b']);
    expect([slots.inFlight, slots.queued]).toEqual([2, 2]);
    ends.get('b')?.();
    expect(started).toEqual(['a', 'b', 'c']);
    ends.get('b')?.(); // a second end of the same member frees nothing more
    expect(started).toEqual(['a', 'b', 'c']);
    ends.get('a')?.();
    expect(started).toEqual(['a', 'b', 'c', 'd']);
    expect([slots.inFlight, slots.queued]).toEqual([2, 0]);
  });

  it('drops a member that ends while it waits, which then never starts', () => {
    const slots = new MemberSlots(10, 1);
    const started: string[] = [];
    const endA = slots.add(() => started.push('a'));
    const endB = slots.add(() => started.push('b'));
    slots.add(() => started.push('c'));
    endB();
    endA();
    expect(started).toEqual(['a', 'c']);
    expect([slots.inFlight, slots.queued]).toEqual([1, 0]);
  });

  it('lets a member that gives its place back at once (a nested composite) pass it on, to its own members first', () => {
    const slots = new MemberSlots(20, 2);
    const started: string[] = [];
    const ends = new Map<string, () => void>();
    // Each of two nested ensembles gives its place back and asks for two members of its own.
    for (const nested of ['e1', 'e2']) {
      slots.add((end) => {
        started.push(nested);
        end();
        for (const leaf of ['x', 'y'])
          ends.set(
            `${nested}.${leaf}`,
            slots.add(() => started.push(`${nested}.${leaf}`)),
          );
      });
    }
    expect(started).toEqual(['e1', 'e1.x', 'e1.y']);
    expect([slots.inFlight, slots.queued]).toEqual([2, 1]);
    ends.get('e1.x')?.();
    expect(started).toEqual(['e1', 'e1.x', 'e1.y', 'e2', 'e2.x']);
    expect([slots.inFlight, slots.queued]).toEqual([2, 1]);
  });

  it('refuses the member request past maxRequests with composite_member_limit, counting ended ones too', () => {
    const slots = new MemberSlots(2, 1);
    slots.add((end) => end());
    slots.add(() => undefined);
    let thrown: unknown;
    try {
      slots.add(() => undefined);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ModelmuxError);
    expect((thrown as ModelmuxError).code).toBe('composite_member_limit');
    expect((thrown as ModelmuxError).status).toBe(502);
    expect((thrown as ModelmuxError).message).toMatch(/more than 2 member requests .*--composite-max-member-requests/);
  });
});
