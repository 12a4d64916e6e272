import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Tests run from the project root (jest's rootDir), as node-script.ts assumes too. */
export const repoRoot = (): string => process.cwd();

async function lastLineOf(script: string): Promise<string> {
  const { stdout } = await run('bash', [join(repoRoot(), 'test', 'tools', script)], { maxBuffer: 16 * 1024 * 1024 });
  const line = stdout.trim().split('\n').pop();
  if (!line) throw new Error(`${script} printed nothing`);
  return line;
}

let assets: Promise<string> | undefined;
/**
 * The folder holding etcd, kube-apiserver, kube-controller-manager and kube-scheduler:
 * KUBEBUILDER_ASSETS when it holds them, else the build script's cache (a no-op once built;
 * the first build takes a long while, so install.sh runs it before the tests).
 */
export function controlPlaneAssets(): Promise<string> {
  assets ??= lastLineOf('build-control-plane.sh');
  return assets;
}

let helm: Promise<string> | undefined;
/** Path of a helm binary built from the Go module proxy (see install-kube-tools.sh). */
export function helmPath(): Promise<string> {
  helm ??= lastLineOf('install-kube-tools.sh');
  return helm;
}

/** kubectl from PATH (Debian's `kubectl` package); KUBECTL overrides. */
export const kubectlPath = (): string => process.env['KUBECTL'] ?? 'kubectl';
