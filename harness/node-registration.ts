import { setTimeout as sleep } from 'node:timers/promises';
import { CoordinationV1Api, CoreV1Api, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import { mergePatch, statusCode } from './kube-api.js';

/** The node's address, and so every pod's hostIP. */
export const HOST_IP = '127.0.0.1';
const HEARTBEAT_MS = 5000;

export interface NodeCapacity {
  /**
   * Kubernetes quantities. Defaults: a big GPU node — cpu 32, memory 256Gi, pods 110,
   * nvidia.com/gpu 4 — so only the GPU count limits scheduling unless a test says otherwise.
   */
  readonly cpu?: string;
  readonly memory?: string;
  readonly pods?: string;
  readonly gpus?: number;
}

function nodeStatusConditions(now: Date): V1Node['status'] {
  const cond = (type: string, status: string, reason: string, message: string) => ({ type, status, reason, message, lastHeartbeatTime: now, lastTransitionTime: now });
  return {
    conditions: [
      cond('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
      cond('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
      cond('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
      cond('Ready', 'True', 'KubeletReady', 'modelmux test node agent is posting ready status'),
    ],
  };
}

/** Creates the Node (or takes over an existing one of that name) with the given capacity, Ready. */
export async function registerNode(core: CoreV1Api, name: string, cap: NodeCapacity): Promise<void> {
  const resources = { cpu: cap.cpu ?? '32', memory: cap.memory ?? '256Gi', pods: cap.pods ?? '110', 'nvidia.com/gpu': String(cap.gpus ?? 4) };
  const now = new Date();
  const status = {
    ...nodeStatusConditions(now),
    capacity: resources,
    allocatable: resources,
    addresses: [
      { type: 'InternalIP', address: HOST_IP },
      { type: 'Hostname', address: name },
    ],
    daemonEndpoints: { kubeletEndpoint: { Port: 0 } },
    nodeInfo: {
      architecture: 'amd64',
      bootID: '',
      containerRuntimeVersion: 'modelmux-node-agent://1',
      kernelVersion: '',
      kubeProxyVersion: '',
      kubeletVersion: 'v1.37.2',
      machineID: name,
      operatingSystem: 'linux',
      osImage: 'modelmux test node',
      systemUUID: name,
    },
  };
  const body: V1Node = {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64' } },
    status,
  };
  try {
    await core.createNode({ body });
  } catch (err) {
    if (statusCode(err) !== 409) throw err;
  }
  // Also when it existed already (an agent restarted under the same name): capacity may differ.
  await core.patchNodeStatus({ name, body: { status } }, mergePatch);
}

/** Renews the node Lease and the Ready condition, so the node lifecycle controller never taints or evicts. */
export async function runHeartbeat(kc: KubeConfig, name: string, signal: AbortSignal): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const coordination = kc.makeApiClient(CoordinationV1Api);
  const namespace = 'kube-node-lease';
  while (!signal.aborted) {
    const now = new Date();
    try {
      await core.patchNodeStatus({ name, body: { status: nodeStatusConditions(now) } }, mergePatch);
      // A MicroTime wants exactly six fractional digits; Date gives three.
      const spec = { holderIdentity: name, leaseDurationSeconds: 40, renewTime: now.toISOString().replace('Z', '000Z') };
      try {
        await coordination.patchNamespacedLease({ name, namespace, body: { spec } }, mergePatch);
      } catch (err) {
        if (statusCode(err) !== 404) throw err;
        await coordination.createNamespacedLease({ namespace, body: { metadata: { name, namespace }, spec: { holderIdentity: name, leaseDurationSeconds: 40 } } });
        await coordination.patchNamespacedLease({ name, namespace, body: { spec } }, mergePatch);
      }
    } catch {
      // The API server may be restarting; the next beat retries.
    }
    await sleep(HEARTBEAT_MS, undefined, { signal }).catch(() => undefined);
  }
}
