import { createHash } from 'node:crypto';
import type { KubernetesObject } from '@kubernetes/client-node';
import { specFingerprint } from './change-filter.js';

/**
 * Why a reconcile applies owned objects: `new` (nothing applied by this process for the
 * resource yet: a start, a new leadership term, a resync or the retry after a failure), `spec`
 * (the desired objects changed: the resource's spec, or the operator's options), `drift` (an
 * owned object in the cache changed other than in its status, or is gone).
 */
export type ApplyReason = 'new' | 'spec' | 'drift';

/** What to apply: everything on `new` and `spec`, only the drifted objects on `drift`. */
export interface ApplyPlan {
  reason: ApplyReason;
  objects: readonly KubernetesObject[];
}

interface AppliedObject {
  /** The resourceVersion the apply answered with, then the last version found changed in status only. */
  resourceVersion: string | undefined;
  /** specFingerprint of that version as the cache holds it, once the cache has shown it. */
  fingerprint: string | undefined;
}

interface Applied {
  desired: string;
  objects: Map<string, AppliedObject>;
}

const objectId = (obj: KubernetesObject): string => `${obj.apiVersion ?? ''}/${obj.kind ?? ''}/${obj.metadata?.name ?? ''}`;

const hashOf = (objects: readonly KubernetesObject[]): string => createHash('sha256').update(JSON.stringify(objects)).digest('base64url');

/**
 * What the last successful apply of each resource left, so that a reconcile woken by a status
 * change — the Deployment's rollout progress, a pod turning ready, an HPA's metrics — applies
 * nothing. Server-side apply of an unchanged object is a no-op for the API server, but it is
 * still a request per owned object per wake-up.
 *
 * An owned object counts as untouched while the cache holds the version the apply answered
 * with, or a later one whose specFingerprint equals that version's: a change in status only.
 * A cache that lags behind the apply's answer, or a version never seen, costs one more
 * (idempotent) apply of that object, never a missed one. In memory only: a new process or
 * leadership term, and each resync, start from nothing and apply everything once.
 */
export class ApplyRecords {
  private readonly byKey = new Map<string, Applied>();

  /**
   * What of `desired` must be applied for the resource `key`, or undefined when `live` (the
   * cache) shows every object as last applied, changed in its status at most.
   */
  plan(key: string, desired: readonly KubernetesObject[], live: (obj: KubernetesObject) => KubernetesObject | undefined): ApplyPlan | undefined {
    const record = this.byKey.get(key);
    if (record === undefined) return { reason: 'new', objects: desired };
    if (record.desired !== hashOf(desired)) return { reason: 'spec', objects: desired };
    const drifted = desired.filter((obj) => {
      const applied = record.objects.get(objectId(obj));
      const cached = live(obj);
      if (applied === undefined || cached === undefined) return true;
      const version = cached.metadata?.resourceVersion;
      const print = specFingerprint(cached);
      if (version !== undefined && version === applied.resourceVersion) applied.fingerprint = print;
      else if (applied.fingerprint !== undefined && applied.fingerprint === print) applied.resourceVersion = version;
      else return true;
      return false;
    });
    return drifted.length === 0 ? undefined : { reason: 'drift', objects: drifted };
  }

  /**
   * Notes a successful apply of `applied`, part or all of `desired`, answered by the API server
   * with `stored` (in the same order). Where `live` already holds the answer's version, its
   * fingerprint is learnt at once; otherwise at the first plan that finds it in the cache.
   */
  remember(
    key: string,
    desired: readonly KubernetesObject[],
    applied: readonly KubernetesObject[],
    stored: readonly KubernetesObject[],
    live: (obj: KubernetesObject) => KubernetesObject | undefined,
  ): void {
    const hash = hashOf(desired);
    let record = this.byKey.get(key);
    if (record === undefined || record.desired !== hash) {
      record = { desired: hash, objects: new Map() };
      this.byKey.set(key, record);
    }
    for (const [i, obj] of applied.entries()) {
      const resourceVersion = stored[i]?.metadata?.resourceVersion;
      const cached = live(obj);
      const seen = resourceVersion !== undefined && cached?.metadata?.resourceVersion === resourceVersion;
      record.objects.set(objectId(obj), { resourceVersion, fingerprint: seen ? specFingerprint(cached) : undefined });
    }
  }

  /** After a failure, or once the resource is gone: the next reconcile applies everything. */
  forget(key: string): void {
    this.byKey.delete(key);
  }

  /** A new leadership term or a resync: every resource is applied again once. */
  clear(): void {
    this.byKey.clear();
  }
}
