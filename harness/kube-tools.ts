import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Tests and benchmarks run from the project root (jest's rootDir; npm scripts), as test/helpers/node-script.ts assumes too. */
export const repoRoot = (): string => process.cwd();

async function lastLineOf(script: string): Promise<string> {
  const { stdout } = await run('bash', [join(repoRoot(), 'test', 'tools', script)], { maxBuffer: 16 * 1024 * 1024 });
  const line = stdout.trim().split('\n').pop();
  if (!line) throw new Error(`${script} printed nothing`);
  return line;
}

const scriptOutputs = new Map<string, Promise<string>>();
/** What a tools script prints on its last line (a path), run once per test process. */
function toolPath(script: string): Promise<string> {
  let out = scriptOutputs.get(script);
  if (!out) scriptOutputs.set(script, (out = lastLineOf(script)));
  return out;
}

/**
 * The folder holding etcd, kube-apiserver, kube-controller-manager and kube-scheduler:
 * KUBEBUILDER_ASSETS when it holds them, else the build script's cache (a no-op once built;
 * the first build takes a long while, so install.sh runs it before the tests).
 */
export const controlPlaneAssets = (): Promise<string> => toolPath('build-control-plane.sh');

/** Path of a helm binary built from the Go module proxy (see install-kube-tools.sh). */
export const helmPath = (): Promise<string> => toolPath('install-kube-tools.sh');

/** kubectl from PATH (Debian's `kubectl` package); KUBECTL overrides. */
export const kubectlPath = (): string => process.env['KUBECTL'] ?? 'kubectl';

/** Path of the prometheus binary (Debian's package; see install-prometheus.sh). */
export const prometheusPath = (): Promise<string> => toolPath('install-prometheus.sh');

/**
 * The folder holding KEDA's `keda` (operator) and `keda-adapter` (metrics API server) binaries
 * and its CRDs in crd/, built from the Go module proxy by build-keda.sh (a no-op once built).
 */
export const kedaAssets = (): Promise<string> => toolPath('build-keda.sh');

/** The folder holding prometheus-adapter's `adapter`, built from the Go module proxy by build-prometheus-adapter.sh (a no-op once built). */
export const prometheusAdapterAssets = (): Promise<string> => toolPath('build-prometheus-adapter.sh');
