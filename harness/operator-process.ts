import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually } from './eventually.js';
import { repoRoot } from './kube-tools.js';
import { spawnManaged, type ManagedProcess } from './process-reaper.js';

export interface OperatorProcess {
  readonly process: ManagedProcess;
  /** The operator's JSON log lines so far. */
  logs(): Promise<string>;
  /** Its metrics/health base URL, e.g. http://127.0.0.1:41234. */
  readonly metricsUrl: string;
  stop(): Promise<void>;
}

/**
 * Runs `node dist/cli/main.js operator` as a real process against `kubeconfig`, and resolves
 * once it has taken the leader Lease and started its watches (or, with waitForLeader false,
 * once it serves its health endpoints: a standby).
 */
export async function startOperator(kubeconfig: string, extraArgs: readonly string[] = [], waitForLeader = true): Promise<OperatorProcess> {
  const dir = await mkdtemp(join(tmpdir(), 'modelmux-operator-'));
  const logFile = join(dir, 'operator.log');
  const proc = spawnManaged(
    process.execPath,
    [join(repoRoot(), 'dist/cli/main.js'), 'operator', '--metrics-host', '127.0.0.1', '--metrics-port', '0', '--lease-duration-seconds', '4', '--replica-image', 'modelmux:test', ...extraArgs],
    { cwd: repoRoot(), env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', KUBECONFIG: kubeconfig }, logFile },
  );
  const logs = (): Promise<string> => readFile(logFile, 'utf8').catch(() => '');
  let exited = false;
  void proc.exited.then(() => (exited = true));
  const metricsUrl = await eventually(async () => {
    if (exited) throw new Error(`operator exited: ${await logs()}`);
    const text = await logs();
    const m = /"operator metrics listening".*?"url":"([^"]+)"/.exec(text);
    if (!m?.[1] || (waitForLeader && !text.includes('"operator started"'))) throw new Error(`operator not started yet: ${text}`);
    return m[1];
  }, 60_000);
  return { process: proc, logs, metricsUrl, stop: () => proc.stop(10_000) };
}
