import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import { podFingerprint } from '../../../operator/event-keys.js';
import { startRefusal } from '../../../operator/start-refusal.js';
import { computeStatus } from '../../../operator/status.js';
import { multiplexedDeploymentSpecSchema, type MultiplexedDeployment } from '../../../common/resource.js';

const REASON =
  'modelmux replica: invalid configuration:\n  - --execution-provider/MODELMUX_EXECUTION_PROVIDER: execution provider "cuda" cannot run here: driver_missing: driver missing (libcuda.so.1)';

const pod = (status: Partial<V1ContainerStatus>, name = 'wine-7d9f-abcde'): V1Pod => ({
  metadata: { name, namespace: 'ml', labels: { 'modelmux.io/deployment': 'wine' } },
  status: {
    phase: 'Running',
    conditions: [{ type: 'Ready', status: 'False', reason: 'ContainersNotReady' }],
    containerStatuses: [{ name: 'modelmux', image: 'modelmux:cuda', imageID: '', ready: false, restartCount: 3, ...status }],
  },
});

const refused = (exitCode: number, message?: string): Partial<V1ContainerStatus> => ({
  state: { waiting: { reason: 'CrashLoopBackOff' } },
  lastState: { terminated: { exitCode, reason: 'Error', ...(message !== undefined ? { message } : {}) } },
});

const mxd: MultiplexedDeployment = {
  apiVersion: 'modelmux.io/v1alpha1',
  kind: 'MultiplexedDeployment',
  metadata: { name: 'wine', namespace: 'ml', generation: 2 },
  spec: multiplexedDeploymentSpecSchema.parse({ replicas: 2, routePrefix: '/wine', modelSource: { uri: 's3://models' }, executionProvider: 'cuda' }),
};

describe('a replica refusing to start', () => {
  it('is told by exit code 2 in back-off, with the replica’s termination message', () => {
    expect(startRefusal(pod(refused(2, `${REASON}\n`)))).toBe(`pod wine-7d9f-abcde exits 2 at start: ${REASON}`);
  });

  it('is told when the container is terminated now, and points at the log when it left no message', () => {
    expect(startRefusal(pod({ state: { terminated: { exitCode: 2 } } }))).toBe('pod wine-7d9f-abcde exits 2 at start: see its log');
  });

  it('is not a crash of another code, a container running again, another container, or a pod being deleted', () => {
    expect(startRefusal(pod(refused(137, 'OOMKilled')))).toBeUndefined();
    expect(startRefusal(pod({ state: { running: {} }, lastState: { terminated: { exitCode: 2 } } }))).toBeUndefined();
    expect(startRefusal(pod({ ...refused(2, REASON), name: 'runtime' }))).toBeUndefined();
    const deleting = pod(refused(2, REASON));
    deleting.metadata = { ...deleting.metadata, deletionTimestamp: new Date('2026-01-01T00:00:00Z') };
    expect(startRefusal(deleting)).toBeUndefined();
  });

  it('makes the resource Degraded/ReplicaRefusesToStart with the reason, instead of a silent crash loop', () => {
    const status = computeStatus({ mxd, deployment: undefined, pods: [pod({ state: { running: {} } }, 'wine-ok'), pod(refused(2, REASON))], now: new Date('2026-01-01T00:00:00Z') });
    expect(status.conditions?.find((c) => c.type === 'Degraded')).toMatchObject({
      status: 'True',
      reason: 'ReplicaRefusesToStart',
      message: `pod wine-7d9f-abcde exits 2 at start: ${REASON}`,
    });
  });

  it('changes the pod’s fingerprint, so the operator reconciles although no pod condition moved', () => {
    expect(podFingerprint(pod(refused(2, REASON)))).not.toBe(podFingerprint(pod({ state: { running: {} } })));
  });
});
