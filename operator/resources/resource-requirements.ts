import type { V1ResourceRequirements } from '@kubernetes/client-node';
import type { MultiplexedDeploymentSpec } from '../../common/resource.js';

/** The resources of the spec, or a share of them for one container of the pod. */
export type ContainerResources = MultiplexedDeploymentSpec['resources'];

/** Requests and limits of one container, a request-only extended resource mirrored into limits. */
export function resourceRequirements(resources: ContainerResources): V1ResourceRequirements {
  const requests = { ...(resources.requests ?? {}) };
  const limits = { ...(resources.limits ?? {}) };
  for (const [name, value] of Object.entries(requests)) {
    if (isExtendedResource(name) && limits[name] === undefined) limits[name] = value;
  }
  const out: V1ResourceRequirements = {};
  if (Object.keys(requests).length > 0) out.requests = requests;
  if (Object.keys(limits).length > 0) out.limits = limits;
  return out;
}

/** Extended resources are domain-prefixed names outside kubernetes.io (e.g. nvidia.com/gpu). */
export function isExtendedResource(name: string): boolean {
  if (!name.includes('/')) return false;
  const domain = name.slice(0, name.indexOf('/'));
  return domain !== 'kubernetes.io' && !domain.endsWith('.kubernetes.io');
}
