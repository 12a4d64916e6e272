import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { CRD_FILE, buildCrd, crdYaml, toStructural } from '../../common/crd.js';

type Obj = Record<string, unknown>;
const get = (o: unknown, ...path: (string | number)[]): unknown => path.reduce<unknown>((acc, k) => (acc !== null && typeof acc === 'object' ? (acc as Obj)[String(k)] : undefined), o);

describe('the MultiplexedDeployment CRD', () => {
  it('matches the committed file in crds/ (run `npm run crds` after changing common/resource.ts)', () => {
    expect(readFileSync(CRD_FILE, 'utf8')).toBe(crdYaml());
  });

  it('parses back to the object it was written from', () => {
    expect(parse(crdYaml())).toEqual(buildCrd());
  });

  const version = get(buildCrd(), 'spec', 'versions', 0);
  const spec = get(version, 'schema', 'openAPIV3Schema', 'properties', 'spec');

  it('has the scale subresource pointing at replicas and the status selector', () => {
    expect(get(version, 'subresources', 'scale')).toEqual({
      specReplicasPath: '.spec.replicas',
      statusReplicasPath: '.status.replicas',
      labelSelectorPath: '.status.selector',
    });
    expect(get(version, 'subresources', 'status')).toEqual({});
  });

  it('is found as mxd and in the modelmux category', () => {
    expect(get(buildCrd(), 'spec', 'names', 'shortNames')).toEqual(['mxd']);
    expect(get(buildCrd(), 'spec', 'names', 'categories')).toEqual(['modelmux']);
  });

  it('prints Replicas, Ready, Models/replica and Age', () => {
    const cols = get(version, 'additionalPrinterColumns') as Obj[];
    expect(cols.map((c) => c['name'])).toEqual(['Replicas', 'Ready', 'Models/replica', 'Age']);
  });

  it('carries required fields, bounds, patterns and defaults of the zod schema', () => {
    expect(get(spec, 'required')).toEqual(['routePrefix', 'modelSource']);
    expect(get(spec, 'properties', 'replicas')).toEqual({ type: 'integer', minimum: 0, maximum: 1000, default: 1 });
    expect(get(spec, 'properties', 'routePrefix', 'pattern')).toBe('^\\/[a-z0-9]([-a-z0-9]*[a-z0-9])?$');
    expect(get(spec, 'properties', 'modelSource', 'required')).toEqual(['uri']);
    expect(get(spec, 'properties', 'autoscaling', 'properties', 'targetOngoingRequests', 'exclusiveMinimum')).toBe(true);
  });

  it('carries the zod refinement of autoscaling as a CEL rule', () => {
    expect(get(spec, 'properties', 'autoscaling', 'x-kubernetes-validations')).toEqual([{ rule: 'self.minReplicas <= self.maxReplicas', message: 'minReplicas must not exceed maxReplicas' }]);
  });

  it('accepts quantities as integers or strings, in the kubebuilder int-or-string shape', () => {
    const gpu = get(spec, 'properties', 'resources', 'properties', 'limits', 'additionalProperties') as Obj;
    expect(gpu['x-kubernetes-int-or-string']).toBe(true);
    expect(gpu['anyOf']).toEqual([{ type: 'integer' }, { type: 'string' }]);
    expect(typeof gpu['pattern']).toBe('string');
    expect(gpu['type']).toBeUndefined();
  });

  it('is structural: no additionalProperties:false, $schema or propertyNames anywhere', () => {
    const text = JSON.stringify(buildCrd());
    expect(text).not.toContain('"additionalProperties":false');
    expect(text).not.toContain('$schema');
    expect(text).not.toContain('propertyNames');
  });
});

describe('toStructural', () => {
  it('drops the safe-integer bounds zod writes on every int', () => {
    expect(toStructural({ type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER })).toEqual({ type: 'integer', minimum: 0 });
  });
  it('leaves an anyOf of other types alone', () => {
    const s = { anyOf: [{ type: 'string' }, { type: 'boolean' }] };
    expect(toStructural(s)).toEqual(s);
  });
});
