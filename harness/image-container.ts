import { execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { removeDirOnDeath, spawnManaged } from './process-reaper.js';

// Runs a command from the image test/tools/build-image.sh unpacked, as a kubelet runs a container
// of the chart's pods, without a container runtime (none runs here): in a mount namespace of its
// own, the image's root filesystem read-only (an overlay whose upper layer only receives the
// mount points, as a runtime creates them), a tmpfs on each writable path the pod mounts
// (emptyDir), a fresh /proc, a minimal /dev, and the host's /etc/hosts and /etc/resolv.conf; then
// chroot as the pod's numeric user with no capabilities and no_new_privs
// (allowPrivilegeEscalation: false). The network is the host's. Needs root (mounts, chroot).

/** What the image says about how to run it (the OCI config `buildah inspect` writes). */
export interface ImageConfig {
  /** "uid:gid" or "uid", numeric. */
  user: string;
  /** NAME=value. */
  env: string[];
  entrypoint: string[];
  cmd: string[];
  workingDir: string;
}

/** A folder build-image.sh wrote: rootfs/ and image.json. */
export interface BuiltImage {
  dir: string;
  rootfs: string;
  config: ImageConfig;
}

export function readBuiltImage(dir: string): BuiltImage {
  const inspect = JSON.parse(readFileSync(join(dir, 'image.json'), 'utf8')) as { OCIv1?: { config?: Record<string, unknown> } };
  const c = inspect.OCIv1?.config ?? {};
  const strings = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : []);
  return {
    dir,
    rootfs: join(dir, 'rootfs'),
    config: {
      user: typeof c['User'] === 'string' ? c['User'] : '',
      env: strings(c['Env']),
      entrypoint: strings(c['Entrypoint']),
      cmd: strings(c['Cmd']),
      workingDir: typeof c['WorkingDir'] === 'string' && c['WorkingDir'] !== '' ? c['WorkingDir'] : '/',
    },
  };
}

/** One container of a pod, as the pod spec says it (only what this runner honours). */
export interface ContainerSpec {
  /** The pod spec's `command`: replaces the image's ENTRYPOINT. */
  command?: readonly string[];
  /** The pod spec's `args`: replace the image's CMD, after its ENTRYPOINT. */
  args?: readonly string[];
  /** Added to (and overriding) the image's env. */
  env?: Readonly<Record<string, string>>;
  /** runAsUser/runAsGroup; the image's USER when absent. */
  runAs?: { uid: number; gid: number };
  /** Mount paths of the pod's emptyDir volumes: each a fresh writable tmpfs. */
  emptyDirs?: readonly string[];
  /** readOnlyRootFilesystem (default true, as the chart sets it). */
  readOnlyRootFilesystem?: boolean;
  /**
   * Host files or folders bind-mounted at `mountPath` (a pod's emptyDir shared between its
   * containers, a hostPath volume, its service-account files), after the emptyDirs.
   */
  binds?: readonly { hostPath: string; mountPath: string; readOnly: boolean }[];
  /** The pod spec's `workingDir`; the image's WorkingDir when absent. */
  workingDir?: string;
  /** stdout and stderr appended to this file instead of kept in memory (`output()` is then empty). */
  logFile?: string;
}

export interface ImageProcess {
  child: ChildProcess;
  /** stdout and stderr so far. */
  output(): string;
  stdout(): string;
  /** Resolves with the exit code (null when a signal ended it) once it has exited and its scratch folder is gone. */
  exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<number | null>;
}

function runAsOf(image: BuiltImage, spec: ContainerSpec): { uid: number; gid: number } {
  if (spec.runAs) return spec.runAs;
  const [uid = '', gid = uid] = image.config.user.split(':');
  if (!/^\d+$/.test(uid) || !/^\d+$/.test(gid)) throw new Error(`the image's USER "${image.config.user}" is not numeric: runAsNonRoot cannot verify it`);
  return { uid: Number(uid), gid: Number(gid) };
}

// Positional parameters: $1 rootfs, $2 scratch folder, $3 uid, $4 gid, $5 working dir, $6 "ro"|"rw",
// $7 emptyDir paths (newline-separated), $8 binds ("ro|rw<TAB>host path<TAB>mount path" a line),
// then the command and env as `env -i` takes them.
const SETUP = `
set -eu
lower=$1 scratch=$2 uid=$3 gid=$4 wd=$5 ro=$6 empties=$7 binds=$8
shift 8
mount -t tmpfs -o mode=0700 scratch "$scratch"
mkdir "$scratch/upper" "$scratch/work" "$scratch/root"
root=$scratch/root
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$scratch/upper,workdir=$scratch/work" "$root"
mkdir -p "$root/proc" "$root/dev" "$root/etc"
mount -t proc proc "$root/proc"
mount -t tmpfs -o mode=0755,nosuid dev "$root/dev"
for d in null zero full random urandom tty; do touch "$root/dev/$d"; mount --bind "/dev/$d" "$root/dev/$d"; done
mkdir "$root/dev/shm" && mount -t tmpfs -o mode=1777,nosuid,nodev,size=64m shm "$root/dev/shm"
ln -s /proc/self/fd "$root/dev/fd"
for f in hosts resolv.conf; do touch "$root/etc/$f"; mount --bind -o ro "/etc/$f" "$root/etc/$f"; done
# A mount point is made and resolved inside the root, so that a symlink of the image (Debian's
# /var/run -> /run) leads where the container will see it, never onto the host's folders.
inside() { chroot "$root" /bin/sh -c "$1" inside "$2"; }
printf '%s\\n' "$empties" | while IFS= read -r p; do
  [ -n "$p" ] || continue
  p=$(inside 'mkdir -p "$1" && realpath "$1"' "$p")
  mount -t tmpfs -o mode=0777,nosuid,nodev "emptydir" "$root$p"
done
tab=$(printf '\\t')
printf '%s\\n' "$binds" | while IFS="$tab" read -r mode src p; do
  [ -n "$p" ] || continue
  if [ -d "$src" ]; then p=$(inside 'mkdir -p "$1" && realpath "$1"' "$p")
  else p=$(inside 'mkdir -p "$(dirname "$1")" && touch "$1" && realpath "$1"' "$p"); fi
  mount --bind "$src" "$root$p" || exit 1
  [ "$mode" = rw ] || mount -o remount,bind,ro "$root$p" || exit 1
done || exit 1
[ "$ro" = rw ] || mount -o remount,bind,ro "$root"
exec setpriv --no-new-privs -- chroot --userspec="$uid:$gid" --groups="$gid" "$root" /usr/bin/env -i -C "$wd" "$@"
`;

/**
 * Starts `image`'s entrypoint with the spec's args (or the image's CMD) as the container would
 * run. The child's pid is the program's own: every step execs the next.
 */
export async function runImage(image: BuiltImage, spec: ContainerSpec = {}): Promise<ImageProcess> {
  return Promise.resolve().then(() => startImage(image, spec));
}

/** runImage, started before it returns (the node agent reports the container's pid at once); throws what runImage rejects with. */
export function startImage(image: BuiltImage, spec: ContainerSpec = {}): ImageProcess {
  if (process.getuid?.() !== 0) throw new Error('running the image needs root (mount namespaces, chroot): the image and cluster tiers run as root in CI');
  const { uid, gid } = runAsOf(image, spec);
  const scratch = mkdtempSync(join(tmpdir(), 'modelmux-container-'));
  const env = new Map(image.config.env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
  for (const [k, v] of Object.entries(spec.env ?? {})) env.set(k, v);
  // As a kubelet does: `command` replaces ENTRYPOINT (and drops CMD), `args` replaces CMD.
  const command = spec.command ? [...spec.command, ...(spec.args ?? [])] : [...image.config.entrypoint, ...(spec.args ?? image.config.cmd)];
  if (command.length === 0) throw new Error('neither the image nor the spec names a command');
  // Its own process group, killed with the test process however that dies (process-reaper.ts).
  const managed = spawnManaged(
    'unshare',
    [
      '--mount',
      '--propagation',
      'private',
      '--',
      '/bin/sh',
      '-c',
      SETUP,
      'container',
      image.rootfs,
      scratch,
      String(uid),
      String(gid),
      spec.workingDir ?? image.config.workingDir,
      spec.readOnlyRootFilesystem === false ? 'rw' : 'ro',
      (spec.emptyDirs ?? []).join('\n'),
      (spec.binds ?? []).map((b) => `${b.readOnly ? 'ro' : 'rw'}\t${b.hostPath}\t${b.mountPath}`).join('\n'),
      ...[...env].map(([k, v]) => `${k}=${v}`),
      ...command,
    ],
    // The host's tools (unshare, mount, setpriv, chroot) from the host's system folders; nothing of the test's env reaches the container.
    { ...(spec.logFile === undefined ? { pipe: true } : { logFile: spec.logFile }), env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } },
  );
  const keepScratch = removeDirOnDeath(scratch);
  const child = managed.child;
  let out = '';
  let stdout = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => ((out += d), (stdout += d)));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (out += d));
  // 'close' comes once its output has been read to the end, after 'exit'.
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const exited = Promise.all([managed.exited, closed]).then(async ([code]) => {
    // The mounts died with the namespace; only the empty mount point is left.
    await rm(scratch, { recursive: true, force: true });
    keepScratch();
    return code;
  });
  return {
    child,
    output: () => out,
    stdout: () => stdout,
    exited,
    // SIGTERM to the program alone, as a kubelet signals a container's first process; whatever
    // it leaves in its group is killed once it has exited (process-reaper.ts).
    stop: async (graceMs = 10_000) => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** Runs a command from the image to its end; its exit code and output. */
export async function runImageToEnd(image: BuiltImage, spec: ContainerSpec, timeoutMs = 60_000): Promise<{ code: number | null; output: string; stdout: string }> {
  const p = await runImage(image, spec);
  const timer = setTimeout(() => p.child.kill('SIGKILL'), timeoutMs);
  const code = await p.exited;
  clearTimeout(timer);
  return { code, output: p.output(), stdout: p.stdout() };
}

/** The folder build-image.sh unpacks this tree's image to (it may not be built yet). */
export function builtImageDir(repoRoot: string): string {
  return (
    execFileSync('bash', [join(repoRoot, 'test/tools/build-image.sh'), '--print-path'], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .pop() ?? ''
  );
}

/** A fresh machine's base and image build take about 10 minutes; a changed tree about 5. */
export const IMAGE_BUILD_TIMEOUT_MS = 30 * 60_000;

/**
 * This tree's image, built on first use outside CI, as the other tiers build their servers; CI
 * builds it before the tests (.ci/run), so a missing image there means that step failed. Throws
 * with the build command when there is none: no tier falls back to running the checkout.
 */
export function ensureBuiltImage(repoRoot: string, tier: string): BuiltImage {
  const dir = builtImageDir(repoRoot);
  if (!existsSync(join(dir, 'image.json')) && !process.env['CI']) {
    console.log(`The ${tier} builds the image from this tree first (bash test/tools/build-image.sh, as root): ${dir}`);
    execFileSync('bash', [join(repoRoot, 'test/tools/build-image.sh')], { stdio: ['ignore', 'ignore', 'inherit'], timeout: IMAGE_BUILD_TIMEOUT_MS });
  }
  if (!existsSync(join(dir, 'image.json'))) {
    throw new Error(
      `The ${tier} found no image built from this tree (it would be in ${dir}). ` +
        (process.env['CI']
          ? 'CI builds it before the tests (.ci/run: bash test/tools/build-image.sh): that step failed, and its output says why.'
          : 'Its build (bash test/tools/build-image.sh, as root) ended without one: its output above says why.'),
    );
  }
  return readBuiltImage(dir);
}
