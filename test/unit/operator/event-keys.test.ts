import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import { controllerKey, podFingerprint, podKey, resourceKey, splitResourceKey } from '../../../operator/event-keys.js';

const pod = (over: Partial<V1Pod> = {}): V1Pod => ({
  metadata: { name: 'wine-abc', namespace: 'ml', uid: 'u1', labels: { 'modelmux.io/deployment': 'wine' } },
  status: { phase: 'Running', podIP: '10.0.0.7', conditions: [{ type: 'Ready', status: 'True' }] },
  ...over,
});

describe('event keys', () => {
  it('maps an owned object to its controlling MultiplexedDeployment', () => {
    const obj: KubernetesObject = {
      metadata: {
        namespace: 'ml',
        ownerReferences: [
          { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'other', uid: '1' },
          { apiVersion: 'modelmux.io/v1alpha1', kind: 'MultiplexedDeployment', name: 'wine', uid: '2', controller: true },
        ],
      },
    };
    expect(controllerKey(obj)).toBe('ml/wine');
  });

  it('ignores objects another controller owns', () => {
    expect(controllerKey({ metadata: { namespace: 'ml', ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'x', uid: '1', controller: true }] } })).toBeUndefined();
  });

  it('maps a replica pod through the label the router selects on', () => {
    expect(podKey(pod())).toBe('ml/wine');
    expect(podKey({ metadata: { namespace: 'ml', name: 'p' } })).toBeUndefined();
  });

  it('splits a key at the first slash', () => {
    expect(splitResourceKey(resourceKey('ml', 'wine'))).toEqual({ namespace: 'ml', name: 'wine' });
  });

  it('ignores model-table annotation churn but sees readiness and scheduling changes', () => {
    const base = podFingerprint(pod());
    const churned = pod();
    churned.metadata = { ...churned.metadata, resourceVersion: '99', annotations: { 'modelmux.io/models': '{"version":7}', 'controller.kubernetes.io/pod-deletion-cost': '3' } };
    expect(podFingerprint(churned)).toBe(base);
    expect(podFingerprint(pod({ status: { phase: 'Running', podIP: '10.0.0.7', conditions: [{ type: 'Ready', status: 'False' }] } }))).not.toBe(base);
    expect(podFingerprint(pod({ status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable' }] } }))).not.toBe(base);
    expect(podFingerprint({ ...pod(), metadata: { ...pod().metadata, deletionTimestamp: new Date('2026-01-01T00:00:00Z') } })).not.toBe(base);
  });
});
