/** An object that a SlotSet may hold: the set keeps the member's place in the field it names. */
export type Slotted<K extends string> = Record<K, number>;

/**
 * A set of objects that come and go with every request (requests in flight, calls, tries),
 * kept in an array: `add`, `delete` and `has` are O(1) through the member's place in the array,
 * which the set writes to a field of the member (`key`). A member leaves by a swap with the last
 * one, so the array holds no hole and no reference to a member that left.
 *
 * Why not a Set or a Map: V8 keeps their entries in a hash table that it replaces with a new one
 * every few dozen deletions, and links the replaced table to its successor for the iterators in
 * flight. A replaced table that reached the old generation is dead but is not collected until
 * the next full collection, and until then each young-generation collection takes it for live:
 * its successor, and every member the two held, are copied and then promoted, and so on down
 * the chain of tables. A long-lived Set churned by requests makes each young collection copy
 * megabytes of finished requests (ADR 0056).
 */
export class SlotSet<K extends string, T extends Slotted<K>> {
  private readonly members: T[] = [];

  constructor(private readonly key: K) {}

  get size(): number {
    return this.members.length;
  }

  has(member: T): boolean {
    const i = member[this.key];
    return this.members[i] === member;
  }

  /** Adds `member` unless it is in the set already. */
  add(member: T): void {
    if (this.has(member)) return;
    (member as Slotted<K>)[this.key] = this.members.length;
    this.members.push(member);
  }

  /** Removes `member`; false when it was not in the set. */
  delete(member: T): boolean {
    if (!this.has(member)) return false;
    const i = member[this.key];
    const last = this.members.pop() as T;
    if (last !== member) {
      this.members[i] = last;
      (last as Slotted<K>)[this.key] = i;
    }
    (member as Slotted<K>)[this.key] = -1;
    return true;
  }

  /** The members now, in no particular order: a copy, so the set may change while it is gone through. */
  values(): T[] {
    return this.members.slice();
  }

  /**
   * Visits the members of the set as it is now, skipping any that an earlier visit removed: a
   * sweep may end members (its own and others) and add new ones, which wait for the next sweep.
   */
  forEach(visit: (member: T) => void): void {
    for (const member of this.values()) if (this.has(member)) visit(member);
  }
}
