import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChildProcess } from 'node:child_process';
import type { CoreV1Api, KubeConfig, V1Container, V1ProjectedVolumeSource, V1ContainerState, V1ContainerStatus, V1Pod, V1PodCondition, V1Probe } from '@kubernetes/client-node';
import { errorText, mergePatch, statusCode } from './kube-api.js';
import { repoRoot } from './kube-tools.js';
import { requestServiceAccountToken, writeKubeconfig } from './kubeconfig.js';
import { startImage, type ContainerSpec } from './image-container.js';
import { acquireLoopbackAddress, releaseLoopbackAddress } from './loopback-addresses.js';
import { HOST_IP } from './node-registration.js';
import { chooseImage, IMAGE_NOT_BUILT_HERE, imageContainerSpec, unsupportedFields, type PodImages } from './pod-container.js';
import { ContainerConfigError, fieldValue, resolveContainerEnv } from './pod-env.js';
import { runProbe } from './pod-probe.js';
import { spawnManaged } from './process-reaper.js';

/** The replica's entrypoint in its image: `modelmux` is `node dist/cli/main.js`. */
const ENTRYPOINT = 'dist/cli/main.js';

export interface RunningPod {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  /** The pod's own loopback address (its status.podIP). */
  readonly address: string;
  /** Folder holding `<container>.log` (stdout and stderr), the pod's kubeconfig and emptyDirs. */
  readonly dir: string;
}

/** What every pod runner of one agent shares. */
export interface AgentContext {
  readonly kc: KubeConfig;
  readonly core: CoreV1Api;
  readonly server: string;
  readonly caPem: string;
  readonly dataDir: string;
  readonly extraEnv: Readonly<Record<string, string>>;
  readonly probePeriodMs: number;
  readonly images: PodImages;
}

/** A container's process: the program itself (its pid is the container's) in a group of its own. */
interface ContainerProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  stop(graceMs: number): Promise<unknown>;
}

type ContainerRun = {
  readonly spec: V1Container;
  readonly env: ReadonlyMap<string, string>;
  /** From the modelmux image (image-container.ts), or a host process where the test declared its image so. */
  readonly fromImage: boolean;
  /** How image-container.ts runs it, when fromImage. */
  readonly imageSpec?: ContainerSpec;
  proc?: ContainerProcess | undefined;
  state: V1ContainerState;
  lastState?: V1ContainerState;
  restartCount: number;
  ready: boolean;
  probeFailures: number;
};

/** One pod: its address, its container processes, its probes and its status reports. */
export class PodRunner {
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
      await mkdir(join(this.dir, 'tmp'), { recursive: true });
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
      await this.stopContainers(1000);
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
    const choices = spec.containers.map((c) => chooseImage(c.image, this.ctx.images));
    if (choices.some((c) => c.run === 'none')) {
      // As a kubelet that cannot pull an image: the pod stays Pending, the container says why.
      this.configError = 'an image cannot run here';
      this.containers = spec.containers.map((c, i) => {
        const choice = choices[i];
        const state: V1ContainerState = choice?.run === 'none' ? { waiting: { reason: IMAGE_NOT_BUILT_HERE, message: choice.message } } : { waiting: { reason: 'ContainerCreating' } };
        return { spec: c, env: new Map(), fromImage: false, state, restartCount: 0, ready: false, probeFailures: 0 };
      });
      return;
    }
    let kubeconfig: string;
    try {
      const unsupported = unsupportedFields(this.pod);
      if (unsupported.length > 0) throw new ContainerConfigError(`the test node agent cannot honour ${unsupported.join(', ')} (docs/testing.md)`);
      const token = await this.requestToken();
      kubeconfig = await this.writePodKubeconfig(token);
      const folders = await this.prepareVolumes(token);
      const server = new URL(this.ctx.server);
      // In a container run from the image the volumes are mounted where the pod says. A host
      // process has no mounts: paths under an emptyDir's mountPath in its env and args are
      // rewritten to the folder, unless the host has that path (/tmp): rewriting it would also
      // redirect host paths a test passes in.
      this.containers = [];
      for (const [i, c] of spec.containers.entries()) {
        const vars = await resolveContainerEnv(this.pod, c, { podIP: address, hostIP: HOST_IP }, this.envSources());
        if (choices[i]?.run === 'image') {
          // The agent adds MODELMUX_HOST (each pod binds its own loopback address: there is no
          // network namespace) and the API server's address, where the in-cluster config looks.
          const env = { ...Object.fromEntries(vars), ...this.ctx.extraEnv, MODELMUX_HOST: address, KUBERNETES_SERVICE_HOST: server.hostname, KUBERNETES_SERVICE_PORT: server.port || '443' };
          const imageSpec = imageContainerSpec(this.pod, c, this.ctx.images.modelmux, folders, env, join(this.dir, `${c.name}.log`));
          this.containers.push({ spec: c, env: vars, fromImage: true, imageSpec, state: { waiting: { reason: 'ContainerCreating' } }, restartCount: 0, ready: false, probeFailures: 0 });
          continue;
        }
        const mounts = (c.volumeMounts ?? []).flatMap((m) => {
          const local = spec.volumes?.find((v) => v.name === m.name)?.emptyDir ? folders.get(m.name) : undefined;
          return local && !existsSync(m.mountPath) ? [{ from: m.mountPath.replace(/\/+$/, ''), to: local }] : [];
        });
        const rewrite = (s: string): string => {
          for (const m of mounts) if (s === m.from || s.startsWith(m.from + '/')) return m.to + s.slice(m.from.length);
          return s;
        };
        this.containers.push({
          spec: { ...c, args: (c.args ?? []).map(rewrite), ...(c.command ? { command: c.command.map(rewrite) } : {}) },
          env: new Map([...vars].map(([k, v]) => [k, rewrite(v)])),
          fromImage: false,
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
      this.containers = spec.containers.map((c) => ({
        spec: c,
        env: new Map(),
        fromImage: false,
        state: { waiting: { reason: 'CreateContainerConfigError', message } },
        restartCount: 0,
        ready: false,
        probeFailures: 0,
      }));
      return;
    }
    this.configError = undefined;
    // A deletion that arrived while preparing wins: the loop then stops what was launched.
    if (this.phase !== 'starting') return;
    for (const c of this.containers) this.launch(c, kubeconfig);
    this.phase = 'running';
  }

  /**
   * Each volume's folder on this machine: emptyDirs a folder of the pod's dir that every user
   * may write (fsGroup's effect, roughly), hostPaths themselves, projected volumes (the
   * service-account volume the API server adds) written once as a kubelet writes them.
   */
  private async prepareVolumes(token: string): Promise<Map<string, string>> {
    const folders = new Map<string, string>();
    for (const v of this.pod.spec?.volumes ?? []) {
      const path = join(this.dir, 'volumes', v.name);
      if (v.emptyDir) {
        await mkdir(path, { recursive: true });
        await chmod(path, 0o777);
        folders.set(v.name, path);
      } else if (v.hostPath) {
        if (v.hostPath.type === 'DirectoryOrCreate') await mkdir(v.hostPath.path, { recursive: true });
        else if (!existsSync(v.hostPath.path)) throw new ContainerConfigError(`hostPath ${v.hostPath.path} of volume "${v.name}" does not exist`);
        folders.set(v.name, v.hostPath.path);
      } else if (v.projected) {
        await this.writeProjected(v.projected, path, token);
        folders.set(v.name, path);
      }
    }
    return folders;
  }

  /** A projected volume's files, as a kubelet writes them (once: tokens are not rotated in a test's hour). */
  private async writeProjected(projected: V1ProjectedVolumeSource, path: string, token: string): Promise<void> {
    const sources = this.envSources();
    const write = async (file: string, text: string): Promise<void> => {
      await mkdir(dirname(join(path, file)), { recursive: true, mode: 0o755 });
      await writeFile(join(path, file), text, { mode: projected.defaultMode ?? 0o644 });
    };
    await mkdir(path, { recursive: true, mode: 0o755 });
    for (const s of projected.sources ?? []) {
      if (s.serviceAccountToken) await write(s.serviceAccountToken.path, token);
      for (const item of s.downwardAPI?.items ?? []) if (item.fieldRef) await write(item.path, fieldValue(this.pod, item.fieldRef.fieldPath, { podIP: this.address ?? '', hostIP: HOST_IP }));
      const ref = s.configMap ?? s.secret;
      if (!ref) continue;
      const kind = s.configMap ? 'configMap' : 'secret';
      const values = s.configMap ? await sources.configMap(ref.name ?? '') : await sources.secret(ref.name ?? '');
      if (!values) {
        if (ref.optional) continue;
        throw new ContainerConfigError(`${kind} "${ref.name ?? ''}" of a projected volume not found`);
      }
      for (const item of ref.items ?? Object.keys(values).map((key) => ({ key, path: key }))) {
        const value = values[item.key];
        if (value === undefined) throw new ContainerConfigError(`couldn't find key ${item.key} in ${kind} ${this.ns}/${ref.name ?? ''} of a projected volume`);
        await write(item.path, value);
      }
    }
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
    const decode = (data: Record<string, string> | undefined): Record<string, string> => Object.fromEntries(Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
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

  /** A TokenRequest token of the pod's service account, bound to the pod, as a kubelet asks for it. */
  private async requestToken(): Promise<string> {
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
    return token;
  }

  /** The kubeconfig a container run on the host finds its service account's token in. */
  private async writePodKubeconfig(token: string): Promise<string> {
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
    const proc = c.fromImage ? this.launchFromImage(c) : this.launchOnHost(c, kubeconfig);
    const startedAt = new Date().toISOString();
    c.proc = proc;
    c.state = { running: { startedAt: startedAt as unknown as Date } };
    c.ready = false;
    c.probeFailures = 0;
    void proc.exited.then((code) => {
      if (c.proc !== proc) return;
      const signal = proc.child.signalCode;
      const message = code !== 0 && c.spec.terminationMessagePolicy === 'FallbackToLogsOnError' ? this.logTail(c.spec.name) : undefined;
      c.lastState = {
        terminated: {
          exitCode: code ?? 137,
          reason: code === 0 ? 'Completed' : 'Error',
          ...(signal ? { signal: 9 } : {}),
          ...(message ? { message } : {}),
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

  /**
   * From the image's root filesystem (harness/image-container.ts), as the pod spec says; the
   * agent adds MODELMUX_HOST (each pod binds its own loopback address: there is no network
   * namespace) and the API server's address where the in-cluster config looks for it.
   */
  private launchFromImage(c: ContainerRun): ContainerProcess {
    try {
      return startImage(this.ctx.images.modelmux, c.imageSpec ?? {});
    } catch (err) {
      // Not started (no root here): the container fails as one whose runtime refuses it, saying why in its log.
      const logFile = join(this.dir, `${c.spec.name}.log`);
      appendFileSync(logFile, `node agent: cannot start the container from the image: ${errorText(err)}\n`);
      return spawnManaged('false', [], { logFile });
    }
  }

  /** A process of this machine, for an image the test declared to run on the host. */
  private launchOnHost(c: ContainerRun, kubeconfig: string): ContainerProcess {
    const { command, args } = this.commandOf(c.spec);
    const env: NodeJS.ProcessEnv = {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      HOME: this.dir,
      // A container has a /tmp of its own: what a pod leaves there goes when the agent stops.
      TMPDIR: join(this.dir, 'tmp'),
      ...Object.fromEntries(c.env),
      ...this.ctx.extraEnv,
      MODELMUX_HOST: this.address ?? '',
      KUBECONFIG: kubeconfig,
    };
    return spawnManaged(command, args, { cwd: repoRoot(), env, logFile: join(this.dir, `${c.spec.name}.log`) });
  }

  /**
   * What a kubelet puts in a failed container's termination message under FallbackToLogsOnError
   * (no process here has a /dev/termination-log): the last 80 lines of its log, at most 2048 bytes.
   */
  private logTail(container: string): string | undefined {
    try {
      const text = readFileSync(join(this.dir, `${container}.log`), 'utf8');
      return text.split('\n').slice(-80).join('\n').slice(-2048);
    } catch {
      return undefined;
    }
  }

  private containerId(proc: ContainerProcess): string {
    return `modelmux-node-agent://${proc.child.pid ?? 0}`;
  }

  private async probe(c: ContainerRun): Promise<void> {
    if (!c.proc) return;
    const p: V1Probe | undefined = c.spec.readinessProbe;
    if (!p) {
      c.ready = true;
      return;
    }
    const ok = await runProbe(c.spec, p, this.address ?? '');
    if (ok) {
      c.probeFailures = 0;
      c.ready = true;
    } else if (++c.probeFailures >= (p.failureThreshold ?? 3) || !c.ready) {
      c.ready = false;
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

  private async stopContainers(graceMs: number): Promise<void> {
    await Promise.all(this.containers.flatMap((c) => (c.proc ? [c.proc.stop(graceMs)] : [])));
  }

  private async terminate(): Promise<void> {
    // Honour the grace period, capped: the replica's drain is what tests care about, not 30 s waits.
    const graceMs = Math.min(this.pod.metadata?.deletionGracePeriodSeconds ?? 30, 10) * 1000;
    await this.stopContainers(graceMs);
    if (this.podGone) return;
    const uid = this.pod.metadata?.uid;
    for (let attempt = 0; attempt < 20; attempt++) {
      try {
        await this.ctx.core.deleteNamespacedPod({ name: this.name, namespace: this.ns, gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0, ...(uid ? { preconditions: { uid } } : {}) } });
        return;
      } catch (err) {
        const code = statusCode(err);
        if (code === 404 || code === 409) return;
        if (attempt === 19) process.stderr.write(`node agent: pod ${this.ns}/${this.name}: delete failed 20 times (${errorText(err)}); the next resync tries again\n`);
        await sleep(500);
      }
    }
  }
}
