import { ConfigError } from '../../../common/config.js';
import { REPLICA_ENV } from '../../../common/replica-env.js';
import { parseReplicaConfig } from '../../../replica/config.js';

describe('replica configuration', () => {
  it('reads the environment names the operator writes, with flags winning', () => {
    const c = parseReplicaConfig(['--max-models', '7'], {
      [REPLICA_ENV.modelSource]: 's3://models/wine',
      [REPLICA_ENV.maxModels]: '3',
      [REPLICA_ENV.maxModelBytes]: '4Gi',
      [REPLICA_ENV.s3ForcePathStyle]: 'false',
      [REPLICA_ENV.executionProvider]: 'cuda',
      [REPLICA_ENV.podName]: 'wine-abc',
      [REPLICA_ENV.podNamespace]: 'ml',
    });
    expect(c).toMatchObject({ modelSource: 's3://models/wine', maxModels: 7, maxModelBytes: 4 * 1024 ** 3, s3ForcePathStyle: false, executionProvider: 'cuda', podName: 'wine-abc', port: 8080 });
  });

  it('has safe defaults: batching off, test hooks off', () => {
    const c = parseReplicaConfig(['--model-source', 'file:///models'], {});
    expect(c).toMatchObject({ maxBatchSize: 1, batchWaitMs: 0, testHooks: false, testLoadDelayMs: 0, maxBodyBytes: 8 * 1024 * 1024, maxOngoingRequests: 16 });
  });

  it('warms models by default and leaves the device budget to the GPU unless given', () => {
    const defaults = parseReplicaConfig(['--model-source', 'file:///models'], {});
    expect({ warmup: defaults.warmup, deviceMemoryBytes: defaults.deviceMemoryBytes }).toEqual({ warmup: true, deviceMemoryBytes: undefined });
    const c = parseReplicaConfig(['--model-source', 'file:///models', '--warmup', 'false', '--device-memory-bytes', '12Gi'], {});
    expect(c).toMatchObject({ warmup: false, deviceMemoryBytes: 12 * 1024 ** 3 });
  });

  it('reports every problem at once', () => {
    try {
      parseReplicaConfig(['--max-models', '0', '--execution-provider', 'tpu'], { [REPLICA_ENV.modelSource]: 'http://example' });
      throw new Error('accepted');
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      expect((e as ConfigError).problems).toHaveLength(3);
    }
  });
});
