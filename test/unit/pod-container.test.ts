import type { V1Pod } from '@kubernetes/client-node';
import type { BuiltImage } from '../../harness/image-container.js';
import { chooseImage, imageContainerSpec, isModelmuxImage, unsupportedFields } from '../../harness/pod-container.js';

const image: BuiltImage = {
  dir: '/cache/image-x',
  rootfs: '/cache/image-x/rootfs',
  config: { user: '10001:10001', env: [], entrypoint: ['node', '/app/dist/cli/main.js'], cmd: ['--help'], workingDir: '/app' },
};
const images = { modelmux: image, onHost: new Set(['seldonio/mlserver:1.7.1']) };

const pod = (spec: Partial<NonNullable<V1Pod['spec']>>): V1Pod => ({ metadata: { name: 'p', namespace: 'ns' }, spec: { containers: [{ name: 'main', image: 'modelmux:test' }], ...spec } });

describe('how the node agent runs a container', () => {
  it('runs every image of the modelmux repository from the built image, whatever its registry, tag or digest', () => {
    for (const name of ['modelmux:test', 'ghcr.io/modelmux/modelmux:0.1.0', 'localhost:5000/modelmux', 'ghcr.io/modelmux/modelmux@sha256:abc'])
      expect([name, isModelmuxImage(name)]).toEqual([name, true]);
    for (const name of ['modelmux-sidecar:1', 'busybox:1.36', 'ghcr.io/modelmux/other:1']) expect([name, isModelmuxImage(name)]).toEqual([name, false]);
  });

  it('runs a declared image on the host and refuses any other, naming it', () => {
    expect(chooseImage('ghcr.io/modelmux/modelmux:0.1.0', images)).toEqual({ run: 'image' });
    expect(chooseImage('seldonio/mlserver:1.7.1', images)).toEqual({ run: 'host' });
    expect(chooseImage('seldonio/mlserver:1.8.0', images)).toMatchObject({ run: 'none', message: expect.stringContaining('"seldonio/mlserver:1.8.0"') as unknown });
  });

  it('names each pod spec field it cannot honour, and none of the operator’s', () => {
    expect(
      unsupportedFields(
        pod({
          initContainers: [{ name: 'init' }],
          volumes: [
            { name: 'cfg', configMap: { name: 'c' } },
            { name: 'cache', emptyDir: {} },
            { name: 'host', hostPath: { path: '/data' } },
          ],
          containers: [
            {
              name: 'main',
              image: 'modelmux:test',
              lifecycle: {},
              volumeMounts: [
                { name: 'cache', mountPath: '/c', subPath: 'x' },
                { name: 'gone', mountPath: '/g' },
              ],
            },
          ],
        }),
      ),
    ).toEqual([
      'spec.initContainers',
      'spec.volumes[cfg].configMap',
      'spec.containers[main].lifecycle',
      'spec.containers[main].volumeMounts[cache].subPath',
      'spec.containers[main].volumeMounts[gone]: no such volume',
    ]);
    expect(
      unsupportedFields(
        pod({
          volumes: [
            { name: 'sa', projected: { sources: [{ serviceAccountToken: { path: 'token' } }, { downwardAPI: { items: [{ path: 'namespace', fieldRef: { fieldPath: 'metadata.namespace' } }] } }] } },
          ],
        }),
      ),
    ).toEqual([]);
  });

  it('mounts the pod’s volumes where the container says, projected ones read-only, as the pod’s user', () => {
    const p = pod({
      securityContext: { runAsUser: 65532, runAsGroup: 65532, runAsNonRoot: true },
      volumes: [
        { name: 'cache', emptyDir: {} },
        { name: 'sa', projected: { sources: [] } },
      ],
    });
    const c = {
      name: 'main',
      image: 'modelmux:test',
      args: ['replica'],
      securityContext: { readOnlyRootFilesystem: true },
      volumeMounts: [
        { name: 'cache', mountPath: '/var/cache/modelmux' },
        { name: 'sa', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount' },
      ],
    };
    const folders = new Map([
      ['cache', '/pod/volumes/cache'],
      ['sa', '/pod/volumes/sa'],
    ]);
    expect(imageContainerSpec(p, c, image, folders, { A: '1' }, '/pod/main.log')).toEqual({
      args: ['replica'],
      env: { A: '1' },
      runAs: { uid: 65532, gid: 65532 },
      readOnlyRootFilesystem: true,
      binds: [
        { hostPath: '/pod/volumes/cache', mountPath: '/var/cache/modelmux', readOnly: false },
        { hostPath: '/pod/volumes/sa', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true },
      ],
      logFile: '/pod/main.log',
    });
    // Without a securityContext: the image's USER, a writable root (Kubernetes' default).
    expect(imageContainerSpec(pod({}), { name: 'main', workingDir: '/srv' }, image, new Map(), {}, '/l')).toMatchObject({
      runAs: { uid: 10001, gid: 10001 },
      readOnlyRootFilesystem: false,
      workingDir: '/srv',
    });
    expect(() => imageContainerSpec(pod({ securityContext: { runAsNonRoot: true, runAsUser: 0 } }), { name: 'main' }, image, new Map(), {}, '/l')).toThrow('runAsNonRoot');
  });
});
