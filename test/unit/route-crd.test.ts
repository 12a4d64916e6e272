import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { MODEL_ROUTE_CRD, ROUTE_CRD_FILE } from '../../common/crd.js';
import { buildCrdFrom, crdYamlFrom } from '../../common/crd-generator.js';

type Obj = Record<string, unknown>;
const get = (o: unknown, ...path: (string | number)[]): unknown => path.reduce<unknown>((acc, k) => (acc !== null && typeof acc === 'object' ? (acc as Obj)[String(k)] : undefined), o);

describe('the ModelRoute CRD', () => {
  const crd = buildCrdFrom(MODEL_ROUTE_CRD);
  const version = get(crd, 'spec', 'versions', 0);
  const spec = get(version, 'schema', 'openAPIV3Schema', 'properties', 'spec');

  it('matches the committed file in crds/ (run `npm run crds` after changing common/model-route.ts)', () => {
    expect(readFileSync(ROUTE_CRD_FILE, 'utf8')).toBe(crdYamlFrom(MODEL_ROUTE_CRD));
    expect(parse(crdYamlFrom(MODEL_ROUTE_CRD))).toEqual(crd);
  });

  it('is modelroutes.modelmux.io, found as mroute and in the modelmux category, with a status subresource', () => {
    expect(get(crd, 'metadata', 'name')).toBe('modelroutes.modelmux.io');
    expect(get(crd, 'spec', 'names', 'shortNames')).toEqual(['mroute']);
    expect(get(crd, 'spec', 'names', 'categories')).toEqual(['modelmux']);
    expect(get(version, 'subresources')).toEqual({ status: {} });
  });

  it('prints Pool, Kind, Backends, Accepted and Age', () => {
    const cols = get(version, 'additionalPrinterColumns') as Obj[];
    expect(cols.map((c) => c['name'])).toEqual(['Pool', 'Kind', 'Backends', 'Accepted', 'Age']);
  });

  it('carries the zod refinements as CEL rules: one kind, weights, quorum', () => {
    expect(get(spec, 'x-kubernetes-validations', 0, 'rule')).toContain('has(self.split)');
    expect(get(spec, 'properties', 'split', 'x-kubernetes-validations', 0, 'rule')).toBe('self.backends.exists(b, !has(b.weight) || b.weight > 0)');
    expect(get(spec, 'properties', 'ensemble', 'x-kubernetes-validations', 0, 'rule')).toBe('!has(self.quorum) || self.quorum <= size(self.members)');
    expect(get(spec, 'properties', 'split', 'properties', 'backends', 'maxItems')).toBe(16);
  });

  it('is structural: no additionalProperties:false, $schema or propertyNames anywhere', () => {
    const text = JSON.stringify(crd);
    expect(text).not.toContain('"additionalProperties":false');
    expect(text).not.toContain('$schema');
    expect(text).not.toContain('propertyNames');
  });
});
