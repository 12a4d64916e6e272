import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CoordinationV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  Watch,
  type KubeConfig,
  type V1Container,
  type V1ContainerState,
  type V1ContainerStatus,
  type V1Node,
  type V1Pod,
  type V1PodCondition,
  type V1Probe,
} from '@kubernetes/client-node';
import type { ControlPlane } from './control-plane.js';
import { repoRoot } from './kube-tools.js';
import { loadKubeConfig, requestServiceAccountToken, writeKubeconfig } from './kubeconfig.js';
import { acquireLoopbackAddress, releaseLoopbackAddress } from './loopback-addresses.js';
import { ContainerConfigError, resolveContainerEnv } from './pod-env.js';
import { spawnManaged, type ManagedProcess } from './process-reaper.js';

export interface NodeCapacity {
  /** Kubernetes quantities. Defaults: cpu 8, memory 32Gi, pods 110, nvidia.com/gpu 4. */
  readonly cpu?: string;
  readonly memory?: string;
  readonly pods?: string;
  readonly gpus?: number;
}

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
}

export interface RunningPod {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  /** The pod's own loopback address (its status.podIP). */
  readonly address: string;
  /** Folder holding `<container>.log` (stdout and stderr), the pod's kubeconfig and emptyDirs. */
  readonly dir: string;
}

export interface NodeAgent {
  readonly nodeName: string;
  /** Folder with one sub-folder per pod ever run (logs survive until stop). */
  readonly dataDir: string;
  /** Pods this agent runs now. */
  pods(): RunningPod[];
  /** Stops every pod process, then the heartbeat and the watch. The Node object stays. */
  stop(): Promise<void>;
}

const HOST_IP = '127.0.0.1';
const HEARTBEAT_MS = 5000;
/** The replica's entrypoint in its image: `modelmux` is `node dist/cli/main.js`. */
const ENTRYPOINT = 'dist/cli/main.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));
const statusCode = (err: unknown): number | undefined => (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'number' ? err.code : undefined);

/**
 * A kubelet for the cluster tests. It registers a Node with the given capacity (so the real
 * scheduler binds pods to it, or leaves them Pending when they ask for more), keeps it Ready
 * with a Lease and status heartbeat, and runs every container of every pod bound to it as a
 * local process — `node dist/cli/main.js <args>` whatever the image — on the pod's own
 * 127.0.0.x address, with the pod's env, `MODELMUX_HOST=<address>` and `KUBECONFIG=<a file
 * holding a TokenRequest token of the pod's service account>`, so the replica meets the RBAC
 * the operator granted it. It speaks to the API server as `system:node:<name>`, under the Node
 * authorizer and NodeRestriction, as a kubelet does.
 */
export async function startNodeAgent(cp: Pick<ControlPlane, 'server' | 'caPem' | 'userKubeconfig'>, opts: NodeAgentOptions = {}): Promise<NodeAgent> {
  const nodeName = opts.name ?? 'node-1';
  const kc = loadKubeConfig(await cp.userKubeconfig(`system:node:${nodeName}`, ['system:nodes']));
  const core = kc.makeApiClient(CoreV1Api);
  const dataDir = await mkdtemp(join(tmpdir(), `modelmux-node-${nodeName}-`));
  const ctx: AgentContext = {
    nodeName,
    kc,
    core,
    server: cp.server,
    caPem: cp.caPem,
    dataDir,
    extraEnv: opts.extraEnv ?? {},
    probePeriodMs: opts.probePeriodMs ?? 500,
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
    stop: () => {
      stopping ??= (async () => {
        stopController.abort();
        await Promise.all([...runners.values()].map((r) => r.shutdown()));
        await Promise.all([heartbeat, watcher]);
        if (!(opts.keepDataDir ?? process.env['MODELMUX_KEEP_CLUSTER'] === '1')) await rm(dataDir, { recursive: true, force: true });
      })();
      return stopping;
    },
  };
}

interface AgentContext {
  readonly nodeName: string;
  readonly kc: KubeConfig;
  readonly core: CoreV1Api;
  readonly server: string;
  readonly caPem: string;
  readonly dataDir: string;
  readonly extraEnv: Readonly<Record<string, string>>;
  readonly probePeriodMs: number;
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

async function registerNode(core: CoreV1Api, name: string, cap: NodeCapacity): Promise<void> {
  const resources = { cpu: cap.cpu ?? '8', memory: cap.memory ?? '32Gi', pods: cap.pods ?? '110', 'nvidia.com/gpu': String(cap.gpus ?? 4) };
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
      kubeletVersion: 'v1.34.4',
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
async function runHeartbeat(kc: KubeConfig, name: string, signal: AbortSignal): Promise<void> {
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

interface WatchHandlers {
  relisted(pods: V1Pod[]): void;
  event(type: string, pod: V1Pod): void;
}

/** List, then watch from the list's resourceVersion; any end of the watch (410 Gone, a restarting API server) relists. */
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
          { fieldSelector, resourceVersion: list.metadata?.resourceVersion, allowWatchBookmarks: true },
          (type, obj: V1Pod) => {
            if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') on.event(type, obj);
          },
          finish,
        );
        const onAbort = (): void => {
          void controller.then((c) => c.abort(), () => undefined);
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

type ContainerRun = {
  readonly spec: V1Container;
  readonly env: ReadonlyMap<string, string>;
  proc?: ManagedProcess | undefined;
  state: V1ContainerState;
  lastState?: V1ContainerState;
  restartCount: number;
  ready: boolean;
  probeFailures: number;
};

/** One pod: its address, its container processes, its probes and its status reports. */
class PodRunner {
  private pod: V1Pod;
  private readonly dir: string;
  private address: string | undefined;
  private containers: ContainerRun[] = [];
  private configError: string | undefined;
  private phase: 'starting' | 'running' | 'terminating' | 'done' = 'starting';
  private readonly conditionTimes = new Map<string, { status: string; time: string }>();
  private lastReported = '';
  private readonly startTime = new Date().toISOString();
  private readonly loop: Promise<void>;
  private podGone = false;

  constructor(
    private readonly ctx: AgentContext,
    pod: V1Pod,
    private readonly onDone: () => void,
  ) {
    this.pod = pod;
    this.dir = join(ctx.dataDir, `${pod.metadata?.namespace ?? ''}_${pod.metadata?.name ?? ''}_${(pod.metadata?.uid ?? '').slice(0, 8)}`);
    this.loop = this.run();
  }

  info(): RunningPod {
    return { namespace: this.ns, name: this.name, uid: this.pod.metadata?.uid ?? '', address: this.address ?? '', dir: this.dir };
  }

  update(pod: V1Pod): void {
    this.pod = pod;
    if (pod.metadata?.deletionTimestamp && this.phase !== 'terminating' && this.phase !== 'done') this.phase = 'terminating';
  }

  /** The pod object is gone from the API (deleted with grace 0 by someone): stop at once. */
  gone(): void {
    this.podGone = true;
    if (this.phase !== 'done') this.phase = 'terminating';
  }

  /** The agent stops: kill the processes, leave the pod object as it is. */
  async shutdown(): Promise<void> {
    this.podGone = true;
    this.phase = 'terminating';
    await this.loop;
  }

  private get ns(): string {
    return this.pod.metadata?.namespace ?? '';
  }

  private get name(): string {
    return this.pod.metadata?.name ?? '';
  }

  private async run(): Promise<void> {
    try {
      await mkdir(this.dir, { recursive: true });
      this.address = acquireLoopbackAddress();
      let nextStart = 0;
      while (this.phase === 'running' || this.phase === 'starting') {
        // A pod waiting on a missing Secret starts once it appears, as with a kubelet.
        if (this.phase === 'starting' && Date.now() >= nextStart) {
          await this.start();
          nextStart = Date.now() + 2000;
        }
        await this.tick();
        await sleep(this.ctx.probePeriodMs);
      }
      await this.terminate();
    } catch (err) {
      process.stderr.write(`node agent: pod ${this.ns}/${this.name}: ${errorText(err)}\n`);
      await Promise.all(this.containers.map((c) => c.proc?.stop(1000)));
    } finally {
      if (this.address) releaseLoopbackAddress(this.address);
      this.phase = 'done';
      this.onDone();
    }
  }

  private async start(): Promise<void> {
    const spec = this.pod.spec;
    if (!spec) return;
    const address = this.address ?? '';
    let kubeconfig: string;
    try {
      kubeconfig = await this.writePodKubeconfig();
      // emptyDir volumes become folders in the pod's dir; paths under their mountPath in env
      // and args are rewritten to them, since the container's mount paths do not exist here.
      const emptyDirs = new Map<string, string>();
      for (const v of spec.volumes ?? []) {
        if (!v.emptyDir) continue;
        const path = join(this.dir, 'volumes', v.name);
        await mkdir(path, { recursive: true });
        emptyDirs.set(v.name, path);
      }
      this.containers = [];
      for (const c of spec.containers) {
        const vars = await resolveContainerEnv(this.pod, c, { podIP: address, hostIP: HOST_IP }, this.envSources());
        const mounts = (c.volumeMounts ?? []).flatMap((m) => {
          const local = emptyDirs.get(m.name);
          return local ? [{ from: m.mountPath.replace(/\/+$/, ''), to: local }] : [];
        });
        const rewrite = (s: string): string => {
          for (const m of mounts) if (s === m.from || s.startsWith(m.from + '/')) return m.to + s.slice(m.from.length);
          return s;
        };
        this.containers.push({
          spec: { ...c, args: (c.args ?? []).map(rewrite), ...(c.command ? { command: c.command.map(rewrite) } : {}) },
          env: new Map([...vars].map(([k, v]) => [k, rewrite(v)])),
          state: { waiting: { reason: 'ContainerCreating' } },
          restartCount: 0,
          ready: false,
          probeFailures: 0,
        });
      }
    } catch (err) {
      // The kubelet's answer to a missing Secret or key: the container waits, the pod stays Pending.
      this.configError = err instanceof ContainerConfigError ? err.message : `preparing the pod: ${errorText(err)}`;
      const message = this.configError;
      this.containers = spec.containers.map((c) => ({ spec: c, env: new Map(), state: { waiting: { reason: 'CreateContainerConfigError', message } }, restartCount: 0, ready: false, probeFailures: 0 }));
      return;
    }
    this.configError = undefined;
    // A deletion that arrived while preparing wins: the loop then stops what was launched.
    if (this.phase !== 'starting') return;
    for (const c of this.containers) this.launch(c, kubeconfig);
    this.phase = 'running';
  }

  private envSources(): Parameters<typeof resolveContainerEnv>[3] {
    // The Node authorizer lets a node read only objects its pods refer to, and learns of a
    // fresh pod a moment after the scheduler binds it: a 403 is retried briefly.
    const read = async <T>(fetch: () => Promise<T>): Promise<T | undefined> => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await fetch();
        } catch (err) {
          const code = statusCode(err);
          if (code === 404) return undefined;
          if (code !== 403 || attempt >= 20) throw err;
          await sleep(250);
        }
      }
    };
    const decode = (data: Record<string, string> | undefined): Record<string, string> =>
      Object.fromEntries(Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
    return {
      secret: async (name) => {
        const s = await read(() => this.ctx.core.readNamespacedSecret({ name, namespace: this.ns }));
        return s ? { ...decode(s.data), ...(s.stringData ?? {}) } : undefined;
      },
      configMap: async (name) => {
        const m = await read(() => this.ctx.core.readNamespacedConfigMap({ name, namespace: this.ns }));
        return m ? { ...(m.data ?? {}) } : undefined;
      },
    };
  }

  private async writePodKubeconfig(): Promise<string> {
    const sa = this.pod.spec?.serviceAccountName ?? 'default';
    const uid = this.pod.metadata?.uid ?? '';
    let token: string | undefined;
    for (let attempt = 0; token === undefined; attempt++) {
      try {
        token = await requestServiceAccountToken(this.ctx.kc, this.ns, sa, { boundPod: { name: this.name, uid }, expirationSeconds: 3600 });
      } catch (err) {
        // Same authorizer lag as for Secrets; a missing service account is the pod's problem.
        if (attempt >= 20) throw err;
        await sleep(250);
      }
    }
    const path = join(this.dir, 'kubeconfig');
    await writeKubeconfig(path, this.ctx.server, this.ctx.caPem, { token });
    return path;
  }

  private commandOf(c: V1Container): { command: string; args: string[] } {
    const root = repoRoot();
    const cmd = c.command ?? [];
    const args = c.args ?? [];
    const modelmux = (rest: string[]): { command: string; args: string[] } => ({ command: process.execPath, args: [join(root, ENTRYPOINT), ...rest] });
    if (cmd.length === 0) return modelmux(args);
    if (cmd[0] === 'modelmux') return modelmux([...cmd.slice(1), ...args]);
    if (cmd[0] === 'node' && cmd[1]?.endsWith('main.js')) return modelmux([...cmd.slice(2), ...args]);
    if (cmd[0] === 'node') return { command: process.execPath, args: [...cmd.slice(1), ...args] };
    return { command: cmd[0] ?? '', args: [...cmd.slice(1), ...args] };
  }

  private launch(c: ContainerRun, kubeconfig: string): void {
    const { command, args } = this.commandOf(c.spec);
    const env: NodeJS.ProcessEnv = {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      HOME: this.dir,
      ...Object.fromEntries(c.env),
      ...this.ctx.extraEnv,
      MODELMUX_HOST: this.address ?? '',
      KUBECONFIG: kubeconfig,
    };
    const proc = spawnManaged(command, args, { cwd: repoRoot(), env, logFile: join(this.dir, `${c.spec.name}.log`) });
    const startedAt = new Date().toISOString();
    c.proc = proc;
    c.state = { running: { startedAt: startedAt as unknown as Date } };
    c.ready = false;
    c.probeFailures = 0;
    void proc.exited.then((code) => {
      if (c.proc !== proc) return;
      const signal = proc.child.signalCode;
      c.lastState = {
        terminated: {
          exitCode: code ?? 137,
          reason: code === 0 ? 'Completed' : 'Error',
          ...(signal ? { signal: 9 } : {}),
          startedAt: startedAt as unknown as Date,
          finishedAt: new Date().toISOString() as unknown as Date,
          containerID: this.containerId(proc),
        },
      };
      c.ready = false;
      c.proc = undefined;
      if (this.phase !== 'running') return;
      const policy = this.pod.spec?.restartPolicy ?? 'Always';
      if (policy === 'Always' || (policy === 'OnFailure' && code !== 0)) {
        // Back-off 1, 2, 4, 8, 10 s (a kubelet waits 10 s to 5 min; tests have no time for that).
        const delay = Math.min(1000 * 2 ** c.restartCount, 10_000);
        c.state = { waiting: { reason: 'CrashLoopBackOff', message: `back-off ${delay / 1000}s restarting failed container=${c.spec.name} pod=${this.name}` } };
        setTimeout(() => {
          if (this.phase !== 'running') return;
          c.restartCount++;
          this.launch(c, kubeconfig);
        }, delay).unref();
      } else {
        c.state = c.lastState;
      }
    });
  }

  private containerId(proc: ManagedProcess): string {
    return `modelmux-node-agent://${proc.child.pid ?? 0}`;
  }

  private async probe(c: ContainerRun): Promise<void> {
    if (!c.proc) return;
    const p: V1Probe | undefined = c.spec.readinessProbe;
    if (!p) {
      c.ready = true;
      return;
    }
    const ok = await this.runProbe(c.spec, p);
    if (ok) {
      c.probeFailures = 0;
      c.ready = true;
    } else if (++c.probeFailures >= (p.failureThreshold ?? 3) || !c.ready) {
      c.ready = false;
    }
  }

  private async runProbe(container: V1Container, p: V1Probe): Promise<boolean> {
    const get = p.httpGet;
    const tcp = p.tcpSocket;
    const portOf = (port: number | string | undefined): number | undefined =>
      typeof port === 'number' ? port : (container.ports ?? []).find((cp) => cp.name === port)?.containerPort ?? (port !== undefined && /^\d+$/.test(port) ? Number(port) : undefined);
    const timeout = AbortSignal.timeout((p.timeoutSeconds ?? 1) * 1000);
    try {
      if (get) {
        const port = portOf(get.port as number | string);
        if (port === undefined) return false;
        const headers = Object.fromEntries((get.httpHeaders ?? []).map((h) => [h.name, h.value]));
        const res = await fetch(`${(get.scheme ?? 'HTTP').toLowerCase()}://${get.host ?? this.address ?? ''}:${port}${get.path ?? '/'}`, { headers, signal: timeout });
        await res.arrayBuffer();
        return res.status >= 200 && res.status < 400;
      }
      if (tcp) {
        const port = portOf(tcp.port as number | string);
        if (port === undefined) return false;
        const { connect } = await import('node:net');
        return await new Promise<boolean>((resolve) => {
          const s = connect({ host: this.address ?? '', port, timeout: 1000 }, () => {
            s.destroy();
            resolve(true);
          });
          s.on('error', () => resolve(false));
          s.on('timeout', () => {
            s.destroy();
            resolve(false);
          });
        });
      }
      // exec probes cannot run without a container image: count them as passing.
      return true;
    } catch {
      return false;
    }
  }

  private async tick(): Promise<void> {
    await Promise.all(this.containers.map((c) => this.probe(c)));
    await this.report();
  }

  private condition(type: string, ok: boolean, reason?: string): V1PodCondition {
    const status = ok ? 'True' : 'False';
    const prev = this.conditionTimes.get(type);
    const time = prev && prev.status === status ? prev.time : new Date().toISOString();
    this.conditionTimes.set(type, { status, time });
    return { type, status, lastTransitionTime: time as unknown as Date, ...(reason ? { reason } : {}) };
  }

  private async report(): Promise<void> {
    if (this.podGone) return;
    const policy = this.pod.spec?.restartPolicy ?? 'Always';
    const allReady = this.containers.length > 0 && this.containers.every((c) => c.ready);
    const terminated = this.containers.filter((c) => c.state.terminated);
    const finished = policy !== 'Always' && this.containers.length > 0 && terminated.length === this.containers.length;
    const phase = this.configError ? 'Pending' : finished ? (terminated.every((c) => c.state.terminated?.exitCode === 0) ? 'Succeeded' : 'Failed') : 'Running';
    const notReady = allReady ? undefined : 'ContainersNotReady';
    const statuses: V1ContainerStatus[] = this.containers.map((c) => ({
      name: c.spec.name,
      image: c.spec.image ?? '',
      imageID: '',
      ready: c.ready,
      started: c.proc !== undefined,
      restartCount: c.restartCount,
      state: c.state,
      ...(c.lastState ? { lastState: c.lastState } : {}),
      ...(c.proc ? { containerID: this.containerId(c.proc) } : {}),
    }));
    const status = {
      phase,
      hostIP: HOST_IP,
      hostIPs: [{ ip: HOST_IP }],
      podIP: this.address,
      podIPs: [{ ip: this.address }],
      startTime: this.startTime,
      conditions: [
        this.condition('PodReadyToStartContainers', true),
        this.condition('Initialized', true),
        this.condition('ContainersReady', allReady, notReady),
        this.condition('Ready', allReady, notReady),
        this.condition('PodScheduled', true),
      ],
      containerStatuses: statuses,
    };
    const text = JSON.stringify(status);
    if (text === this.lastReported) return;
    try {
      await this.ctx.core.patchNamespacedPodStatus({ name: this.name, namespace: this.ns, body: { status } }, mergePatch);
      this.lastReported = text;
    } catch {
      // API server restarting or pod deleted: the next tick tries again.
    }
  }

  private async terminate(): Promise<void> {
    // Honour the grace period, capped: the replica's drain is what tests care about, not 30 s waits.
    const graceMs = Math.min(this.pod.metadata?.deletionGracePeriodSeconds ?? 30, 10) * 1000;
    await Promise.all(this.containers.map((c) => c.proc?.stop(graceMs)));
    if (this.podGone) return;
    const uid = this.pod.metadata?.uid;
    for (let attempt = 0; attempt < 20; attempt++) {
      try {
        await this.ctx.core.deleteNamespacedPod({ name: this.name, namespace: this.ns, gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0, ...(uid ? { preconditions: { uid } } : {}) } });
        return;
      } catch (err) {
        const code = statusCode(err);
        if (code === 404 || code === 409) return;
        await sleep(500);
      }
    }
  }
}
