import { z } from 'zod';
import { stringify } from 'yaml';
import { API_GROUP, API_VERSION, KIND, PLURAL } from './names.js';
import { multiplexedDeploymentSpecSchema, multiplexedDeploymentStatusSchema } from './resource.js';

/**
 * The MultiplexedDeployment CustomResourceDefinition, generated from the zod schemas in
 * resource.ts so that the API server refuses exactly what the operator would refuse.
 * `npm run crds` writes it to crds/; a unit test fails when the committed file drifts.
 */

export const CRD_FILE = 'crds/modelmux.io_multiplexeddeployments.yaml';
export const SHORT_NAME = 'mxd';
export const CATEGORY = 'modelmux';

type JsonSchema = { [key: string]: unknown };

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
  return toStructural(z.toJSONSchema(schema, { io: 'input', target: 'openapi-3.0' }) as JsonSchema);
}

/** The CRD as an object, ready for YAML or for the API server. */
export function buildCrd(): JsonSchema {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${PLURAL}.${API_GROUP}`, labels: { 'app.kubernetes.io/name': 'modelmux' } },
    spec: {
      group: API_GROUP,
      names: {
        kind: KIND,
        listKind: `${KIND}List`,
        plural: PLURAL,
        singular: KIND.toLowerCase(),
        shortNames: [SHORT_NAME],
        categories: [CATEGORY],
      },
      scope: 'Namespaced',
      versions: [
        {
          name: API_VERSION,
          served: true,
          storage: true,
          subresources: {
            status: {},
            scale: {
              specReplicasPath: '.spec.replicas',
              statusReplicasPath: '.status.replicas',
              labelSelectorPath: '.status.selector',
            },
          },
          additionalPrinterColumns: [
            { name: 'Replicas', type: 'integer', jsonPath: '.spec.replicas', description: 'Desired replica pods.' },
            { name: 'Ready', type: 'integer', jsonPath: '.status.readyReplicas', description: 'Replica pods passing readiness.' },
            { name: 'Models/replica', type: 'integer', jsonPath: '.spec.maxModelsPerReplica', description: 'Models each replica keeps loaded.' },
            { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
          ],
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: 'A pool of replica pods that serve many same-shaped ONNX models, loaded on demand.',
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: schemaOf(multiplexedDeploymentSpecSchema),
                status: schemaOf(multiplexedDeploymentStatusSchema),
              },
            },
          },
        },
      ],
    },
  };
}

/** The committed text of CRD_FILE. */
export function crdYaml(): string {
  const header = '# Generated from common/resource.ts by `npm run crds`. Do not edit: a unit test fails on drift.\n';
  return header + stringify(buildCrd(), { lineWidth: 0 });
}
