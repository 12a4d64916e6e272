import { KIND, PLURAL } from './names.js';
import { buildCrdFrom, crdYamlFrom, type CrdDefinition, type JsonSchema } from './crd-generator.js';
import { ROUTE_KIND, ROUTE_PLURAL, ROUTE_SHORT_NAME, modelRouteSpecSchema, modelRouteStatusSchema } from './model-route.js';
import { multiplexedDeploymentSpecSchema, multiplexedDeploymentStatusSchema } from './resource.js';

/** The modelmux CRDs, each generated from its zod schemas by crd-generator.ts. */

export { CATEGORY, toStructural } from './crd-generator.js';

export const SHORT_NAME = 'mxd';

export const MULTIPLEXED_DEPLOYMENT_CRD: CrdDefinition = {
  kind: KIND,
  plural: PLURAL,
  shortName: SHORT_NAME,
  file: 'crds/modelmux.io_multiplexeddeployments.yaml',
  source: 'common/resource.ts',
  description: 'A pool of replica pods that serve many same-shaped ONNX models, loaded on demand.',
  spec: multiplexedDeploymentSpecSchema,
  status: multiplexedDeploymentStatusSchema,
  subresources: {
    status: {},
    scale: {
      specReplicasPath: '.spec.replicas',
      statusReplicasPath: '.status.replicas',
      labelSelectorPath: '.status.selector',
    },
  },
  printerColumns: [
    { name: 'Replicas', type: 'integer', jsonPath: '.spec.replicas', description: 'Desired replica pods.' },
    { name: 'Ready', type: 'integer', jsonPath: '.status.readyReplicas', description: 'Replica pods passing readiness.' },
    { name: 'Models/replica', type: 'integer', jsonPath: '.spec.maxModelsPerReplica', description: 'Models each replica keeps loaded.' },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
};

export const MODEL_ROUTE_CRD: CrdDefinition = {
  kind: ROUTE_KIND,
  plural: ROUTE_PLURAL,
  shortName: ROUTE_SHORT_NAME,
  file: 'crds/modelmux.io_modelroutes.yaml',
  source: 'common/model-route.ts',
  description: 'A public model name routed onto models of one MultiplexedDeployment: a weighted split, an ensemble or a sequence.',
  spec: modelRouteSpecSchema,
  status: modelRouteStatusSchema,
  subresources: { status: {} },
  printerColumns: [
    { name: 'Pool', type: 'string', jsonPath: '.spec.deploymentRef.name', description: 'The MultiplexedDeployment the route sends to.' },
    // JSONPath cannot tell which of split, ensemble and sequence is set: the operator writes both into status.
    { name: 'Kind', type: 'string', jsonPath: '.status.kind', description: 'split, ensemble or sequence.' },
    { name: 'Backends', type: 'string', jsonPath: '.status.backends', description: 'Models the route sends to, with their shares.' },
    { name: 'Accepted', type: 'string', jsonPath: '.status.conditions[?(@.type=="Accepted")].status', description: 'Whether the operator accepted the route.' },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
};

export const CRDS: readonly CrdDefinition[] = [MULTIPLEXED_DEPLOYMENT_CRD, MODEL_ROUTE_CRD];

export const CRD_FILE = MULTIPLEXED_DEPLOYMENT_CRD.file;
export const ROUTE_CRD_FILE = MODEL_ROUTE_CRD.file;

/** The MultiplexedDeployment CRD as an object. */
export function buildCrd(): JsonSchema {
  return buildCrdFrom(MULTIPLEXED_DEPLOYMENT_CRD);
}

/** The committed text of CRD_FILE. */
export function crdYaml(): string {
  return crdYamlFrom(MULTIPLEXED_DEPLOYMENT_CRD);
}
