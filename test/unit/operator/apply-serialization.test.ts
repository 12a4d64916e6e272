// What KubernetesObjectApi.patch (server-side apply) runs every object through before sending it.
import { ObjectSerializer } from '@kubernetes/client-node/dist/serializer.js';
import { getSerializationType } from '@kubernetes/client-node/dist/util.js';
import { appliedObjects, autoscaledResource } from './applied-objects.js';

// client-node serializes a built-in kind through its generated model, which drops any field the
// model does not know. An applied object missing a field would silently give the field up to
// nobody; this checks that every field the builders set reaches the wire.

const mxd = autoscaledResource({
  maxModelsPerReplica: 4,
  modelCacheSize: '2Gi',
  resources: { limits: { 'nvidia.com/gpu': 1, memory: '8Gi' }, requests: { cpu: '500m' } },
  logLevel: 'warn',
});

const wire = (o: unknown): unknown => JSON.parse(JSON.stringify(o));

describe('server-side apply through client-node', () => {
  const objects = appliedObjects(mxd);

  it.each(objects.map((o) => [o.kind ?? '', o] as const))('sends every field of the %s the builder made', (_kind, obj) => {
    const type = getSerializationType(obj.apiVersion, obj.kind);
    // A built-in kind goes through its typed model, not the pass-through for unknown kinds.
    expect(type).toMatch(/^V\d/);
    expect(wire(ObjectSerializer.serialize(obj, type))).toEqual(wire(obj));
  });
});
