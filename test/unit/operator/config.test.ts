import { ConfigError } from '../../../common/config.js';
import { parseOperatorConfig } from '../../../operator/config.js';

describe('operator configuration', () => {
  it('defaults the Lease namespace to POD_NAMESPACE and the identity to POD_NAME, as in a pod', () => {
    const c = parseOperatorConfig([], { POD_NAMESPACE: 'modelmux-system', POD_NAME: 'modelmux-operator-abc' });
    expect(c.leaderElectionNamespace).toBe('modelmux-system');
    expect(c.identity).toBe('modelmux-operator-abc');
    expect(c.leaderElection).toBe(true);
    expect(c.metricsPort).toBe(8081);
    expect(c.namespace).toBeUndefined();
  });

  it('lets a flag win over its environment variable', () => {
    const c = parseOperatorConfig(['--replica-image', 'flag:1', '--leader-election=false'], { MODELMUX_OPERATOR_REPLICA_IMAGE: 'env:1' });
    expect(c.replicaImage).toBe('flag:1');
    expect(c.leaderElection).toBe(false);
  });

  it('reports every bad value at once', () => {
    try {
      parseOperatorConfig(['--metrics-port', '70000', '--workers', '0', '--namespace', 'Bad_NS'], {});
      throw new Error('accepted');
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems.join('\n');
      expect(problems).toContain('--metrics-port');
      expect(problems).toContain('--workers');
      expect(problems).toContain('--namespace');
    }
  });
});
