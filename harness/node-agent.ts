import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, Watch, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { ControlPlane } from './control-plane.js';
import { ensureBuiltImage } from './image-container.js';
import { repoRoot } from './kube-tools.js';
import { loadKubeConfig } from './kubeconfig.js';
import { registerNode, runHeartbeat, type NodeCapacity } from './node-registration.js';
import { PodRunner, type AgentContext, type RunningPod } from './pod-runner.js';
import { removeDirOnDeath } from './process-reaper.js';

export type { NodeCapacity } from './node-registration.js';
export type { RunningPod } from './pod-runner.js';

export interface NodeAgentOptions {
  /** Default `node-1`. */
  readonly name?: string;
  readonly capacity?: NodeCapacity;
  /** Added to every container's environment (after the pod's own env). */
  readonly extraEnv?: Readonly<Record<string, string>>;
  /** How often readiness probes run, whatever the probe's periodSeconds says. Default 500 ms. */
  readonly probePeriodMs?: number;
  /** Keep pod logs and folders after stop. Default: env MODELMUX_KEEP_CLUSTER=1. */
  readonly keepDataDir?: boolean;
  /**
   * Images other than modelmux's whose containers run as processes of this machine (their
   * `command` a host program): runtimes no image of which is built here, such as MLServer. A
   * container of any other image waits with reason ImageNotBuiltHere.
   */
  readonly onHost?: readonly string[];
}

export interface NodeAgent {
  readonly nodeName: string;
  /** Folder with one sub-folder per pod ever run (logs survive until stop). */
  readonly dataDir: string;
  /** Pods this agent runs now. */
  pods(): RunningPod[];
  /**
   * What a pod's containers wrote to stdout and stderr, every run of every pod of that name on
   * this node; `kubectl logs` has no kubelet to ask. For failure messages.
   */
  logsOf(namespace: string, podName: string): Promise<string>;
  /** Stops every pod process, then the heartbeat and the watch. The Node object stays. */
  stop(): Promise<void>;
}

/**
 * A kubelet for the cluster tests. It registers a Node with the given capacity (so the real
 * scheduler binds pods to it, or leaves them Pending when they ask for more), keeps it Ready
 * with a Lease and status heartbeat, and runs every container of the modelmux image from the
 * image built from this tree (harness/image-container.ts: chroot into its root filesystem as the
 * pod's user, with the pod's args, env, volumes and working directory), on the pod's own
 * 127.0.0.x address (`MODELMUX_HOST`), with a TokenRequest token of the pod's service account
 * where the in-cluster config finds it, so the replica meets the RBAC the operator granted it.
 * A pod spec field it cannot honour leaves the container waiting, named (pod-container.ts). It
 * speaks to the API server as `system:node:<name>`, under the Node authorizer and
 * NodeRestriction, as a kubelet does.
 */
export async function startNodeAgent(cp: Pick<ControlPlane, 'server' | 'caPem' | 'userKubeconfig'>, opts: NodeAgentOptions = {}): Promise<NodeAgent> {
  const nodeName = opts.name ?? 'node-1';
  const modelmux = ensureBuiltImage(repoRoot(), 'cluster tier');
  const kc = loadKubeConfig(await cp.userKubeconfig(`system:node:${nodeName}`, ['system:nodes']));
  const core = kc.makeApiClient(CoreV1Api);
  const dataDir = await mkdtemp(join(tmpdir(), `modelmux-node-${nodeName}-`));
  const keep = opts.keepDataDir ?? process.env['MODELMUX_KEEP_CLUSTER'] === '1';
  const forgetDir = keep ? () => undefined : removeDirOnDeath(dataDir);
  const ctx: AgentContext = {
    kc,
    core,
    server: cp.server,
    caPem: cp.caPem,
    dataDir,
    extraEnv: opts.extraEnv ?? {},
    probePeriodMs: opts.probePeriodMs ?? 500,
    images: { modelmux, onHost: new Set(opts.onHost ?? []) },
  };
  const stopController = new AbortController();
  const stopSignal = stopController.signal;

  await registerNode(core, nodeName, opts.capacity ?? {});
  const heartbeat = runHeartbeat(kc, nodeName, stopSignal);

  const runners = new Map<string, PodRunner>();
  const sync = (pod: V1Pod): void => {
    const uid = pod.metadata?.uid;
    if (!uid || pod.spec?.nodeName !== nodeName) return;
    const known = runners.get(uid);
    if (known) {
      known.update(pod);
      return;
    }
    // A finished pod stays finished; a fresh agent must not run it again.
    if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return;
    const runner = new PodRunner(ctx, pod, () => runners.delete(uid));
    runners.set(uid, runner);
    runner.update(pod);
  };
  const watcher = runWatch(kc, core, nodeName, stopSignal, {
    relisted: (pods) => {
      const present = new Set(pods.map((p) => p.metadata?.uid));
      for (const [uid, runner] of runners) if (!present.has(uid)) runner.gone();
      pods.forEach(sync);
    },
    event: (type, pod) => (type === 'DELETED' ? runners.get(pod.metadata?.uid ?? '')?.gone() : sync(pod)),
  });

  let stopping: Promise<void> | undefined;
  return {
    nodeName,
    dataDir,
    pods: () => [...runners.values()].map((r) => r.info()),
    logsOf: async (namespace, podName) => {
      const prefix = `${namespace}_${podName}_`;
      const parts: string[] = [];
      for (const entry of await readdir(dataDir, { withFileTypes: true })) {
        if (!entry.isDirectory() || !entry.name.startsWith(prefix)) continue;
        for (const file of (await readdir(join(dataDir, entry.name))).filter((f) => f.endsWith('.log'))) {
          parts.push(`--- ${entry.name}/${file}\n${await readFile(join(dataDir, entry.name, file), 'utf8')}`);
        }
      }
      return parts.join('\n');
    },
    stop: () => {
      stopping ??= (async () => {
        stopController.abort();
        await Promise.all([...runners.values()].map((r) => r.shutdown()));
        await Promise.all([heartbeat, watcher]);
        if (!keep) await rm(dataDir, { recursive: true, force: true });
        forgetDir();
      })();
      return stopping;
    },
  };
}

interface WatchHandlers {
  relisted(pods: V1Pod[]): void;
  event(type: string, pod: V1Pod): void;
}

/**
 * List, then watch from the list's resourceVersion; any end of the watch (410 Gone, a restarting
 * API server) relists. The watch also ends every 10 s, so the agent resyncs like a kubelet: a pod
 * being deleted whose runner ended without deleting it (its last event came earlier) gets a
 * runner again, which finishes the deletion.
 */
const RESYNC_SECONDS = 10;

async function runWatch(kc: KubeConfig, core: CoreV1Api, nodeName: string, signal: AbortSignal, on: WatchHandlers): Promise<void> {
  const fieldSelector = `spec.nodeName=${nodeName}`;
  const watch = new Watch(kc);
  while (!signal.aborted) {
    try {
      const list = await core.listPodForAllNamespaces({ fieldSelector });
      on.relisted(list.items);
      await new Promise<void>((resolve) => {
        const finish = (): void => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        };
        const controller = watch.watch(
          '/api/v1/pods',
          { fieldSelector, resourceVersion: list.metadata?.resourceVersion, allowWatchBookmarks: true, timeoutSeconds: RESYNC_SECONDS },
          (type, obj: V1Pod) => {
            if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') on.event(type, obj);
          },
          finish,
        );
        const onAbort = (): void => {
          void controller.then(
            (c) => c.abort(),
            () => undefined,
          );
          finish();
        };
        signal.addEventListener('abort', onAbort, { once: true });
        void controller.catch(finish);
      });
    } catch {
      // Listing failed (API server down): retry below.
    }
    await sleep(500, undefined, { signal }).catch(() => undefined);
  }
}
