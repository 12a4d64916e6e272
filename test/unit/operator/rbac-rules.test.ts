import { WATCHED_KINDS } from '../../../operator/caches.js';
import { OPERATOR_CLUSTER_RULES } from '../../../operator/rbac-rules.js';
import { appliedObjects, autoscaledResource } from './applied-objects.js';

const applied = appliedObjects(autoscaledResource());

const groupOf = (apiVersion: string): string => (apiVersion.includes('/') ? (apiVersion.split('/')[0] ?? '') : '');
const pluralOf = (apiVersion: string, kind: string): string => {
  const k = WATCHED_KINDS.find((w) => w.apiVersion === apiVersion && w.kind === kind);
  if (k === undefined) throw new Error(`${apiVersion} ${kind} is applied but not watched`);
  return k.name;
};
const granted = (group: string, resource: string): Set<string> =>
  new Set(OPERATOR_CLUSTER_RULES.filter((r) => r.apiGroups?.includes(group) && r.resources?.includes(resource)).flatMap((r) => r.verbs));

describe('the operator’s RBAC against what it does', () => {
  it('lets the informers list and watch every kind they watch', () => {
    expect(WATCHED_KINDS.length).toBe(9);
    for (const k of WATCHED_KINDS) {
      const verbs = granted(groupOf(k.apiVersion), k.name);
      expect([k.name, verbs.has('list') && verbs.has('watch')]).toEqual([k.name, true]);
    }
  });

  it('lets server-side apply create and patch every kind a reconcile applies, each of them watched', () => {
    expect(applied).toHaveLength(6);
    for (const obj of applied) {
      const apiVersion = obj.apiVersion ?? '';
      const plural = pluralOf(apiVersion, obj.kind ?? '');
      const verbs = granted(groupOf(apiVersion), plural);
      expect([plural, verbs.has('create') && verbs.has('patch')]).toEqual([plural, true]);
    }
  });

  it('lets the operator write a ModelRoute’s status and nothing else of it', () => {
    expect([...granted('modelmux.io', 'modelroutes')].sort()).toEqual(['list', 'watch']);
    expect([...granted('modelmux.io', 'modelroutes/status')]).toEqual(['patch']);
  });

  it('never gets what the caches hold: get is granted on pods only, which the replicas’ Role hands on', () => {
    const withGet = OPERATOR_CLUSTER_RULES.filter((r) => r.verbs.includes('get')).flatMap((r) => r.resources ?? []);
    expect(withGet).toEqual(['pods']);
  });
});
