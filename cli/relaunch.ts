import { spawn } from 'node:child_process';

const FORWARDED = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;

/**
 * Runs this command again in a child with `env`, passing on the signals that stop it and ending
 * as the child ends (its exit code, or its signal). Costs one more Node process; an image that
 * sets LD_LIBRARY_PATH itself never gets here (docs/adr/0045-cuda-provider-from-wheels.md).
 */
export function relaunch(env: NodeJS.ProcessEnv): void {
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit', env });
  for (const signal of FORWARDED) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => {
    if (signal === null) process.exit(code ?? 1);
    for (const s of FORWARDED) process.removeAllListeners(s);
    process.kill(process.pid, signal);
  });
}
