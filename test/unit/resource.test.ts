import { multiplexedDeploymentSpecSchema } from '../../common/resource.js';
import { parseReplicaConfig } from '../../replica/config.js';

const minimal = { routePrefix: '/wine', modelSource: { uri: 'file:///models' } };

describe('the MultiplexedDeployment spec schema', () => {
  it('refuses an unknown cache policy, naming the field', () => {
    const parsed = multiplexedDeploymentSpecSchema.safeParse({ ...minimal, cachePolicy: 'lfu' });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map((i) => i.path.join('.'))).toEqual(['cachePolicy']);
  });

  it('refuses a log level the programs do not know, naming the field', () => {
    const parsed = multiplexedDeploymentSpecSchema.safeParse({ ...minimal, logLevel: 'debug' });
    expect(parsed.error?.issues.map((i) => i.path.join('.'))).toEqual(['logLevel']);
  });

  it('refuses load concurrency outside what the replica accepts', () => {
    expect(multiplexedDeploymentSpecSchema.safeParse({ ...minimal, maxConcurrentLoads: 0 }).success).toBe(false);
    expect(multiplexedDeploymentSpecSchema.safeParse({ ...minimal, maxConcurrentLoads: 65 }).success).toBe(false);
  });

  it('defaults the replica tuning fields to the replica’s own defaults, so the resource changes nothing unset', () => {
    const spec = multiplexedDeploymentSpecSchema.parse(minimal);
    const replica = parseReplicaConfig(['--model-source', 'file:///models'], {});
    expect({ cachePolicy: spec.cachePolicy, shareGraphs: spec.shareGraphs, mapWeights: spec.mapWeights, maxConcurrentLoads: spec.maxConcurrentLoads, logLevel: spec.logLevel }).toEqual({
      cachePolicy: replica.cachePolicy,
      shareGraphs: replica.shareGraphs,
      mapWeights: replica.mapWeights,
      maxConcurrentLoads: replica.maxConcurrentLoads,
      logLevel: replica.logLevel,
    });
  });
});
