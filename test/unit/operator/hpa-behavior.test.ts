import { multiplexedDeploymentSpecSchema } from '../../../common/resource.js';
import { buildHpa, DEFAULT_HPA_BEHAVIOR } from '../../../operator/resources/hpa.js';
import { storedResource } from './applied-objects.js';

const autoscaling = { minReplicas: 1, maxReplicas: 4, targetOngoingRequests: 2 };

describe('the HPA behaviour the operator renders', () => {
  it('sets its defaults when spec.autoscaling.behavior is absent: up at once, down after 300 s by one replica a minute', () => {
    const hpa = buildHpa(storedResource({ autoscaling }));
    expect(hpa?.spec?.behavior).toEqual({
      scaleUp: {
        stabilizationWindowSeconds: 0,
        selectPolicy: 'Max',
        policies: [
          { type: 'Percent', value: 100, periodSeconds: 15 },
          { type: 'Pods', value: 4, periodSeconds: 15 },
        ],
      },
      scaleDown: { stabilizationWindowSeconds: 300, selectPolicy: 'Max', policies: [{ type: 'Pods', value: 1, periodSeconds: 60 }] },
    });
  });

  it('replaces only the fields the user gives, direction by direction', () => {
    const hpa = buildHpa(
      storedResource({
        autoscaling: {
          ...autoscaling,
          behavior: { scaleDown: { stabilizationWindowSeconds: 30, policies: [{ type: 'Percent', value: 50, periodSeconds: 10 }] }, scaleUp: { selectPolicy: 'Disabled' } },
        },
      }),
    );
    expect(hpa?.spec?.behavior?.scaleDown).toEqual({ stabilizationWindowSeconds: 30, selectPolicy: 'Max', policies: [{ type: 'Percent', value: 50, periodSeconds: 10 }] });
    expect(hpa?.spec?.behavior?.scaleUp).toEqual({ ...DEFAULT_HPA_BEHAVIOR.scaleUp, selectPolicy: 'Disabled' });
  });

  it('does not let one rendering change the defaults another one gets', () => {
    const first = buildHpa(storedResource({ autoscaling }));
    first?.spec?.behavior?.scaleDown?.policies?.push({ type: 'Pods', value: 9, periodSeconds: 1 });
    expect(buildHpa(storedResource({ autoscaling }))?.spec?.behavior?.scaleDown?.policies).toEqual([{ type: 'Pods', value: 1, periodSeconds: 60 }]);
  });

  it('refuses what Kubernetes would: unknown fields, a window past an hour, an unknown policy type, no policy', () => {
    const spec = (behavior: unknown): boolean =>
      multiplexedDeploymentSpecSchema.safeParse({ routePrefix: '/wine', modelSource: { uri: 's3://models/wine' }, autoscaling: { ...autoscaling, behavior } }).success;
    expect(spec({ scaleDown: { stabilizationWindowSeconds: 3600 } })).toBe(true);
    expect(spec({ scaleDown: { stabilizationWindowSeconds: 3601 } })).toBe(false);
    expect(spec({ scaleDown: { tolerance: 1 } })).toBe(false);
    expect(spec({ scaleUp: { policies: [{ type: 'Replicas', value: 1, periodSeconds: 15 }] } })).toBe(false);
    expect(spec({ scaleUp: { policies: [] } })).toBe(false);
    expect(spec({ sideways: {} })).toBe(false);
  });
});
