import { z } from 'zod';
import { stringify } from 'yaml';
import { API_GROUP, API_VERSION } from './names.js';

/**
 * Builds a CustomResourceDefinition from the zod schemas of a resource, so that the API server
 * refuses exactly what the programs would refuse. Every modelmux CRD (common/crd.ts) goes
 * through here; `npm run crds` writes them to crds/ and a unit test fails when a committed file drifts.
 */

export type JsonSchema = { [key: string]: unknown };

/** What differs between two modelmux CRDs; the rest (group, version, scope, structure) is shared. */
export interface CrdDefinition {
  kind: string;
  plural: string;
  shortName: string;
  /** The file under the repository root the CRD is committed as. */
  file: string;
  /** The TypeScript file its schemas live in, named in the generated file's header. */
  source: string;
  description: string;
  spec: z.ZodType;
  status: z.ZodType;
  subresources: JsonSchema;
  printerColumns: JsonSchema[];
}

export const CATEGORY = 'modelmux';

function isObject(v: unknown): v is JsonSchema {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** JSON Schema keywords a structural schema (apiextensions.k8s.io/v1) has no room for. */
const DROPPED_KEYWORDS = new Set(['$schema', 'propertyNames', 'id', '$id']);

/**
 * Turns zod's OpenAPI 3.0 output into a structural schema: the API server rejects
 * `additionalProperties: false` next to `properties`, does not know `propertyNames`, and
 * expects int-or-string in the kubebuilder shape (bare types inside anyOf, validations outside).
 */
export function toStructural(node: JsonSchema): JsonSchema {
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (DROPPED_KEYWORDS.has(key)) continue;
    if (key === 'additionalProperties' && value === false) continue;
    // zod writes the safe-integer range on every .int(); int64 is the API server's own bound.
    if ((key === 'maximum' && value === Number.MAX_SAFE_INTEGER) || (key === 'minimum' && value === Number.MIN_SAFE_INTEGER)) continue;
    if (key === 'properties' && isObject(value)) {
      out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, isObject(v) ? toStructural(v) : v]));
    } else if ((key === 'additionalProperties' || key === 'items') && isObject(value)) {
      out[key] = toStructural(value);
    } else {
      out[key] = value;
    }
  }
  const anyOf = out['anyOf'];
  if (Array.isArray(anyOf) && anyOf.length === 2 && anyOf.every(isObject)) {
    const types = anyOf.map((s) => s['type']).sort();
    if (types[0] === 'integer' && types[1] === 'string') {
      delete out['anyOf'];
      const merged: JsonSchema = { ...out };
      for (const branch of anyOf) {
        for (const [k, v] of Object.entries(toStructural(branch))) if (k !== 'type') merged[k] = v;
      }
      merged['anyOf'] = [{ type: 'integer' }, { type: 'string' }];
      merged['x-kubernetes-int-or-string'] = true;
      return merged;
    }
  }
  return out;
}

function schemaOf(schema: z.ZodType): JsonSchema {
  // io 'input': the CRD validates what users write, before defaults and transforms.
  return toStructural(z.toJSONSchema(schema, { io: 'input', target: 'openapi-3.0' }));
}

/** The CRD as an object, ready for YAML or for the API server. */
export function buildCrdFrom(def: CrdDefinition): JsonSchema {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${def.plural}.${API_GROUP}`, labels: { 'app.kubernetes.io/name': 'modelmux' } },
    spec: {
      group: API_GROUP,
      names: {
        kind: def.kind,
        listKind: `${def.kind}List`,
        plural: def.plural,
        singular: def.kind.toLowerCase(),
        shortNames: [def.shortName],
        categories: [CATEGORY],
      },
      scope: 'Namespaced',
      versions: [
        {
          name: API_VERSION,
          served: true,
          storage: true,
          subresources: def.subresources,
          additionalPrinterColumns: def.printerColumns,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: def.description,
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: schemaOf(def.spec),
                status: schemaOf(def.status),
              },
            },
          },
        },
      ],
    },
  };
}

/** The committed text of def.file. */
export function crdYamlFrom(def: CrdDefinition): string {
  const header = `# Generated from ${def.source} by \`npm run crds\`. Do not edit: a unit test fails on drift.\n`;
  return header + stringify(buildCrdFrom(def), { lineWidth: 0 });
}
