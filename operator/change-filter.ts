import { createHash } from 'node:crypto';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { ChangeType } from '../common/kube-informer.js';

/**
 * An object as whoever applies it sees it: everything but its status and the metadata every
 * write changes (resourceVersion, managedFields with their timestamps), hashed. Equal
 * fingerprints of two versions mean the second changed status at most — controller-runtime's
 * GenerationChangedPredicate, for kinds that keep no generation (Service, Role…) as well.
 * Dates are written as the API server writes them: a list through client-node's typed models
 * holds Date objects where a watch event holds the API server's strings.
 */
export function specFingerprint(obj: KubernetesObject & { status?: unknown }): string {
  // JSON leaves out a member whose value is undefined: these are the members left out.
  const metadata = { ...obj.metadata, resourceVersion: undefined, managedFields: undefined };
  const text = JSON.stringify({ ...obj, status: undefined, metadata }, function (this: Record<string, unknown>, key: string, value: unknown) {
    const raw = this[key];
    return raw instanceof Date ? raw.toISOString().replace('.000Z', 'Z') : value;
  });
  return createHash('sha256').update(text).digest('base64url');
}

/**
 * Lets through the events that change something a controller acts on (controller-runtime's
 * predicates): every add and delete, and an update whose fingerprint differs from the last one
 * seen of that object. It remembers one fingerprint per object (by uid) and forgets it with
 * the object, so it must see every event of its kind, whether its controller leads or not.
 */
export class ChangeFilter {
  private readonly seen = new Map<string, string>();

  constructor(private readonly fingerprint: (obj: KubernetesObject) => string) {}

  passes(type: ChangeType, obj: KubernetesObject): boolean {
    const uid = obj.metadata?.uid ?? `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
    if (type === 'delete') {
      this.seen.delete(uid);
      return true;
    }
    const print = this.fingerprint(obj);
    const before = this.seen.get(uid);
    this.seen.set(uid, print);
    return type === 'add' || before !== print;
  }
}
