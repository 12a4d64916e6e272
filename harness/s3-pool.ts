import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { V1Pod } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from './control-plane.js';
import { startNodeAgent, type NodeAgent, type NodeCapacity } from './node-agent.js';
import { startOperator, type OperatorProcess } from './operator-process.js';
import { startRouter, type RouterProcess } from './router-process.js';
import { startS3Server, type S3Server, type S3ServerOptions } from './s3-server.js';

const run = promisify(execFile);

// "An S3 pool on the control plane", as the cluster tests and bench:autoscale run it: the CRDs,
// models in a real S3 server with an `s3-creds` Secret, replica pods the operator makes and the
// node agent runs, and (unless asked not to) a router with kube discovery in front.

export const isReady = (p: V1Pod): boolean => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

export interface S3PoolSpec {
  /** The MultiplexedDeployment's name, route prefix (`/<name>`) and, unless `prefix` says otherwise, its folder in the bucket. */
  readonly name: string;
  readonly prefix?: string;
  readonly replicas: number;
  readonly maxModelsPerReplica: number;
  /** YAML appended to the spec (two-space indent). */
  readonly extraSpec?: string;
}

/** A MultiplexedDeployment reading `s3://<bucket>/<prefix>` with the `s3-creds` Secret. */
export const s3PoolManifest = (s3: S3Server, p: S3PoolSpec): string => `apiVersion: modelmux.io/v1alpha1
kind: MultiplexedDeployment
metadata: { name: ${p.name}, namespace: default }
spec:
  replicas: ${p.replicas}
  routePrefix: /${p.name}
  modelSource: { uri: "s3://${s3.bucket}/${p.prefix ?? p.name}", endpoint: "${s3.endpoint}", credentialsSecret: s3-creds }
  maxModelsPerReplica: ${p.maxModelsPerReplica}
${p.extraSpec ?? ''}`;

/** `count` generated wine models (`wine-0`…) under `<prefix>/`, written by `modelmux models` itself. */
export async function uploadWineModels(s3: S3Server, prefix: string, count: number): Promise<void> {
  await run(process.execPath, [join(process.cwd(), 'dist/cli/main.js'), 'models', '--out', `s3://${s3.bucket}/${prefix}`, '--count', String(count), '--s3-endpoint', s3.endpoint], {
    env: { ...process.env, ...s3.awsEnv },
  });
}

export interface S3PoolCluster {
  readonly cp: ControlPlane;
  readonly s3: S3Server;
  readonly agent: NodeAgent;
  readonly operator: OperatorProcess;
  stop(): Promise<void>;
}

export interface S3PoolClusterOptions {
  readonly s3?: S3ServerOptions;
  /** The node agent's capacity (its default when absent). */
  readonly capacity?: NodeCapacity;
  /** Puts the models in the bucket, once the store serves (before the operator starts). */
  readonly fill?: (s3: S3Server) => Promise<void>;
  /** The node agent's onHost: images whose containers run as host processes. */
  readonly onHost?: readonly string[];
}

/**
 * The control plane and the S3 server (started side by side), the bucket filled, the CRDs
 * established, the `s3-creds` Secret, a node agent and the operator; with `router: true` also a
 * router with kube discovery (the cluster-admin kubeconfig). No pool yet: apply s3PoolManifest.
 */
export async function startS3PoolCluster(opts: S3PoolClusterOptions & { router: true }): Promise<S3PoolCluster & { readonly router: RouterProcess }>;
export async function startS3PoolCluster(opts: S3PoolClusterOptions & { router: false }): Promise<S3PoolCluster>;
export async function startS3PoolCluster(opts: S3PoolClusterOptions & { router: boolean }): Promise<S3PoolCluster & { readonly router?: RouterProcess }> {
  const [cp, s3] = await Promise.all([startControlPlane(), startS3Server(opts.s3 ?? { bucket: 'models' })]);
  let agent: NodeAgent | undefined;
  let operator: OperatorProcess | undefined;
  let router: RouterProcess | undefined;
  const stop = async (): Promise<void> => {
    await router?.stop();
    await operator?.stop();
    await agent?.stop();
    await Promise.all([cp.stop(), s3.stop()]);
  };
  try {
    await opts.fill?.(s3);
    await cp.kubectl(['apply', '-f', 'crds/']);
    await cp.kubectl(['wait', '--for=condition=Established', 'crd/multiplexeddeployments.modelmux.io', '--timeout=60s']);
    await cp.kubectl(['create', 'secret', 'generic', 's3-creds', `--from-literal=AWS_ACCESS_KEY_ID=${s3.accessKeyId}`, `--from-literal=AWS_SECRET_ACCESS_KEY=${s3.secretAccessKey}`]);
    agent = await startNodeAgent(cp, { ...(opts.capacity === undefined ? {} : { capacity: opts.capacity }), ...(opts.onHost === undefined ? {} : { onHost: opts.onHost }) });
    operator = await startOperator(cp.kubeconfigPath);
    if (opts.router) router = await startRouter(['--discovery', 'kube'], { KUBECONFIG: cp.kubeconfigPath });
    return { cp, s3, agent, operator, ...(router ? { router } : {}), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
