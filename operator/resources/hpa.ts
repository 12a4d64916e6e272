import type { V2HorizontalPodAutoscaler, V2HorizontalPodAutoscalerBehavior, V2HPAScalingRules } from '@kubernetes/client-node';
import type { MultiplexedDeploymentSpec } from '../../common/resource.js';
import { API_GROUP, API_VERSION, KIND } from '../../common/names.js';
import { ownedMeta, ownedNames, type StoredMultiplexedDeployment } from './meta.js';

/** The per-pod gauge each replica exports (through a Prometheus adapter as a Pods metric). */
export const ONGOING_REQUESTS_METRIC = 'modelmux_replica_ongoing_requests';
/**
 * The routers' gauge of requests held for a route with no replica (through a Prometheus adapter
 * as an External metric, the chart's `externalRules`), selected by the label `route`: the
 * route's prefix without its slash, which a label value cannot hold.
 */
export const HELD_REQUESTS_METRIC = 'modelmux_router_held_requests';

/** A positive number as a Kubernetes quantity: whole numbers as is, fractions in milli-units. */
export function toQuantity(value: number): string {
  return Number.isInteger(value) ? String(value) : `${Math.max(1, Math.round(value * 1000))}m`;
}

type Behavior = NonNullable<NonNullable<MultiplexedDeploymentSpec['autoscaling']>['behavior']>;
type GivenRules = NonNullable<Behavior['scaleUp']>;
type Rules = { [K in keyof GivenRules]-?: NonNullable<GivenRules[K]> };

/**
 * The behaviour the operator sets unless spec.autoscaling.behavior says otherwise. Up: Kubernetes'
 * own (at once, doubling or +4 pods per 15 s, whichever is more), since waiting costs requests.
 * Down: Kubernetes' 300 s window, then one replica a minute: each replica removed takes its
 * loaded models with it, and the router re-homes them on the others one removal at a time.
 */
export const DEFAULT_HPA_BEHAVIOR: { scaleUp: Rules; scaleDown: Rules } = {
  scaleUp: {
    stabilizationWindowSeconds: 0,
    selectPolicy: 'Max',
    policies: [
      { type: 'Percent', value: 100, periodSeconds: 15 },
      { type: 'Pods', value: 4, periodSeconds: 15 },
    ],
  },
  scaleDown: {
    stabilizationWindowSeconds: 300,
    selectPolicy: 'Max',
    policies: [{ type: 'Pods', value: 1, periodSeconds: 60 }],
  },
};

/** The defaults with each field the user gave in its place. */
export function hpaBehavior(given: Behavior | undefined): V2HorizontalPodAutoscalerBehavior {
  const rules = (d: Rules, g: Behavior['scaleUp']): V2HPAScalingRules => ({
    stabilizationWindowSeconds: g?.stabilizationWindowSeconds ?? d.stabilizationWindowSeconds,
    selectPolicy: g?.selectPolicy ?? d.selectPolicy,
    policies: (g?.policies ?? d.policies).map((p) => ({ ...p })),
  });
  return { scaleUp: rules(DEFAULT_HPA_BEHAVIOR.scaleUp, given?.scaleUp), scaleDown: rules(DEFAULT_HPA_BEHAVIOR.scaleDown, given?.scaleDown) };
}

/**
 * The HPA scales the MultiplexedDeployment itself through its /scale subresource, so
 * spec.replicas stays the one place the replica count lives; undefined when autoscaling is off.
 * With minReplicas 0 it also reads the requests the routers hold for the route: a pool at zero
 * has no pod to read in-flight requests from, and Kubernetes wants an Object or External metric
 * for it. Held requests are sized like in-flight ones (they become in flight once placed) and
 * are 0 whenever the pool has a replica, so the Pods metric sizes a running pool. Only then: a
 * router Prometheus does not scrape would leave that metric missing, which stops the HPA from
 * ever scaling down.
 */
export function buildHpa(mxd: StoredMultiplexedDeployment): V2HorizontalPodAutoscaler | undefined {
  const a = mxd.spec.autoscaling;
  if (a === undefined) return undefined;
  const target = { type: 'AverageValue', averageValue: toQuantity(a.targetOngoingRequests) };
  return {
    apiVersion: 'autoscaling/v2',
    kind: 'HorizontalPodAutoscaler',
    metadata: ownedMeta(mxd, ownedNames(mxd).hpa),
    spec: {
      scaleTargetRef: { apiVersion: `${API_GROUP}/${API_VERSION}`, kind: KIND, name: mxd.metadata.name },
      minReplicas: a.minReplicas,
      maxReplicas: a.maxReplicas,
      behavior: hpaBehavior(a.behavior),
      metrics: [
        { type: 'Pods', pods: { metric: { name: ONGOING_REQUESTS_METRIC }, target } },
        ...(a.minReplicas === 0 ? [{ type: 'External', external: { metric: { name: HELD_REQUESTS_METRIC, selector: { matchLabels: { route: mxd.spec.routePrefix.slice(1) } } }, target } }] : []),
      ],
    },
  };
}
