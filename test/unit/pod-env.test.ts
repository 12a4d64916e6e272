import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { ContainerConfigError, expandReferences, resolveContainerEnv, type EnvSources } from '../../harness/pod-env.js';

// The node agent's env resolution, which cluster tests rely on to behave as a kubelet does.
const pod: V1Pod = {
  metadata: { name: 'web-0', namespace: 'ml', uid: 'u-1', labels: { app: 'web' } },
  spec: { nodeName: 'node-1', serviceAccountName: 'sa', containers: [] },
};
const addr = { podIP: '127.0.0.10', hostIP: '127.0.0.1' };
const sources: EnvSources = {
  secret: (name) => Promise.resolve(name === 'creds' ? { key: 'k1', other: 'o1' } : undefined),
  configMap: (name) => Promise.resolve(name === 'settings' ? { MODE: 'test', key: 'from-cm' } : undefined),
};
const resolve = (c: Partial<V1Container>) => resolveContainerEnv(pod, { name: 'main', ...c }, addr, sources);

describe('pod env resolution', () => {
  it('fills downward-API fields from the pod and its addresses', async () => {
    const env = await resolve({
      env: [
        { name: 'N', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
        { name: 'NS', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
        { name: 'IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
        { name: 'NODE', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
        { name: 'APP', valueFrom: { fieldRef: { fieldPath: "metadata.labels['app']" } } },
      ],
    });
    expect(Object.fromEntries(env)).toEqual({ N: 'web-0', NS: 'ml', IP: '127.0.0.10', NODE: 'node-1', APP: 'web' });
  });

  it('lets env override envFrom, and expands references to earlier variables only', async () => {
    const env = await resolve({
      envFrom: [{ configMapRef: { name: 'settings' } }, { secretRef: { name: 'creds' }, prefix: 'S_' }],
      env: [
        { name: 'key', valueFrom: { secretKeyRef: { name: 'creds', key: 'other' } } },
        { name: 'MSG', value: '$(MODE)/$(LATER)/$$(MODE)' },
        { name: 'LATER', value: 'x' },
      ],
    });
    expect(env.get('key')).toBe('o1');
    expect(env.get('S_key')).toBe('k1');
    expect(env.get('MSG')).toBe('test/$(LATER)/$(MODE)');
  });

  it('refuses a missing Secret or key unless optional, as a kubelet does', async () => {
    await expect(resolve({ env: [{ name: 'X', valueFrom: { secretKeyRef: { name: 'nope', key: 'k' } } }] })).rejects.toBeInstanceOf(ContainerConfigError);
    await expect(resolve({ env: [{ name: 'X', valueFrom: { configMapKeyRef: { name: 'settings', key: 'absent' } } }] })).rejects.toThrow(/absent/);
    const env = await resolve({ env: [{ name: 'X', valueFrom: { secretKeyRef: { name: 'nope', key: 'k', optional: true } } }], envFrom: [{ secretRef: { name: 'gone', optional: true } }] });
    expect(env.has('X')).toBe(false);
  });

  it('leaves unknown references alone', () => {
    expect(expandReferences('$(A)-$(B)', new Map([['A', '1']]))).toBe('1-$(B)');
  });
});
