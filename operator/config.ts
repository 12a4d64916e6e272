import { hostname } from 'node:os';
import { z } from 'zod';
import { booleanString, parseConfig, type OptionSpecs, intString } from '../common/config.js';
import { logOptionSpecs, logOptionsShape } from '../common/log-options.js';

export const operatorConfigSchema = z.object({
  replicaImage: z.string().min(1).default('ghcr.io/modelmux/modelmux:0.1.0'),
  namespace: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
    .optional(),
  leaderElection: booleanString.default(true),
  leaderElectionNamespace: z.string().min(1).optional(),
  leaseName: z.string().min(1).default('modelmux-operator'),
  leaseDurationSeconds: intString(2, 300).default(15),
  identity: z.string().min(1).optional(),
  metricsHost: z.string().min(1).default('0.0.0.0'),
  metricsPort: intString(0, 65535).default(8081),
  workers: intString(1, 32).default(2),
  resyncSeconds: intString(10, 86400).default(300),
  ...logOptionsShape,
});

export type OperatorConfig = z.infer<typeof operatorConfigSchema> & { leaderElectionNamespace: string; identity: string };

const specs: OptionSpecs<typeof operatorConfigSchema.shape> = {
  replicaImage: { flag: 'replica-image', env: 'MODELMUX_OPERATOR_REPLICA_IMAGE', help: 'Image of replica pods when a resource names none.' },
  namespace: { flag: 'namespace', env: 'MODELMUX_OPERATOR_NAMESPACE', help: 'Watch only this namespace (default: all namespaces).' },
  leaderElection: { flag: 'leader-election', env: 'MODELMUX_OPERATOR_LEADER_ELECTION', help: 'Hold a Lease so one instance acts at a time (default true).' },
  leaderElectionNamespace: {
    flag: 'leader-election-namespace',
    env: 'MODELMUX_OPERATOR_LEADER_ELECTION_NAMESPACE',
    help: 'Namespace of the Lease (default: POD_NAMESPACE, else "default").',
  },
  leaseName: { flag: 'lease-name', env: 'MODELMUX_OPERATOR_LEASE_NAME', help: 'Name of the leader-election Lease (default modelmux-operator).' },
  leaseDurationSeconds: { flag: 'lease-duration-seconds', env: 'MODELMUX_OPERATOR_LEASE_DURATION_SECONDS', help: 'How long a silent leader keeps the Lease (default 15).' },
  identity: { flag: 'identity', env: 'MODELMUX_OPERATOR_IDENTITY', help: 'Holder identity in the Lease (default: POD_NAME, else hostname-pid).' },
  metricsHost: { flag: 'metrics-host', env: 'MODELMUX_OPERATOR_METRICS_HOST', help: 'Address of /metrics, /healthz, /readyz (default 0.0.0.0).' },
  metricsPort: { flag: 'metrics-port', env: 'MODELMUX_OPERATOR_METRICS_PORT', help: 'Port of /metrics, /healthz, /readyz (default 8081; 0 picks one).' },
  workers: { flag: 'workers', env: 'MODELMUX_OPERATOR_WORKERS', help: 'Resources reconciled in parallel (default 2).' },
  resyncSeconds: { flag: 'resync-seconds', env: 'MODELMUX_OPERATOR_RESYNC_SECONDS', help: 'Reconcile every resource at least this often (default 300).' },
  ...logOptionSpecs,
};

export function parseOperatorConfig(argv: readonly string[], env: NodeJS.ProcessEnv): OperatorConfig {
  const c = parseConfig(
    'operator',
    'Reconcile MultiplexedDeployment resources into replica pods. Kubernetes access from KUBECONFIG or the in-cluster service account.',
    operatorConfigSchema,
    specs,
    argv,
    env,
  );
  return {
    ...c,
    leaderElectionNamespace: c.leaderElectionNamespace ?? env['POD_NAMESPACE'] ?? 'default',
    identity: c.identity ?? env['POD_NAME'] ?? `${hostname()}-${process.pid}`,
  };
}
