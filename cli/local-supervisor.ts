import type { Logger } from '../common/log.js';
import { RestartBackoff, type BackoffPolicy } from './local-backoff.js';
import { startChild, waitReady, type Child, type ChildExit } from './local-processes.js';

export interface ProcessSpec {
  name: string;
  /** The executable (default: this Node, running `script`); local mode's `--runtime` runs `/bin/sh -c <command>`. */
  program?: string;
  script: string;
  args: readonly string[];
  env: NodeJS.ProcessEnv;
  /** Answers 2xx once the process serves: a restart is reported as done when it does. */
  readyUrl: string;
}

/**
 * One process of the pool, kept running as a kubelet keeps a container. Once `supervise()` is
 * called, an exit that `stop()` did not ask for is followed, after a backoff (local-backoff.ts),
 * by a new start of the same program with the same arguments, environment and port; meanwhile
 * the router's polls find the replica down and send its models' requests to the others. Before
 * `supervise()`, an exit is left to whoever waits for the pool to come up: a process that cannot
 * start at all is reported with its last lines, not retried forever.
 */
export class Supervised {
  private child: Child;
  private startedAt = 0;
  private supervising = false;
  private stopping = false;
  private restartTimer: NodeJS.Timeout | undefined;
  private restarts = 0;
  /** An exit seen before `supervise()`, handled by it. */
  private earlyExit: ChildExit | undefined;
  private readonly backoff: RestartBackoff;

  constructor(
    private readonly spec: ProcessSpec,
    private readonly verbose: boolean,
    private readonly log: Logger,
    policy: BackoffPolicy,
    /** How long a restarted process may take to answer `readyUrl` before that is logged. */
    private readonly readyTimeoutMs: number,
  ) {
    this.backoff = new RestartBackoff(policy);
    this.child = this.start();
  }

  /** The process running now (or the one that last exited, during a backoff). */
  get current(): Child {
    return this.child;
  }

  supervise(): void {
    this.supervising = true;
    if (this.earlyExit !== undefined) this.onExit(this.earlyExit);
  }

  /** SIGTERM (SIGKILL after a grace period) and no restart, during a backoff wait too. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    await this.child.stop();
  }

  kill(): void {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    this.child.kill();
  }

  private start(): Child {
    const child = startChild(this.spec.name, this.spec.script, this.spec.args, this.spec.env, this.verbose, this.spec.program);
    this.startedAt = performance.now();
    this.log.info(`started ${this.spec.name}`, { process: this.spec.name, pid: child.pid, restarts: this.restarts });
    void child.exited.then((exit) => {
      if (this.stopping) return;
      if (this.supervising) this.onExit(exit);
      else this.earlyExit = exit;
    });
    return child;
  }

  private onExit(exit: ChildExit): void {
    this.earlyExit = undefined;
    const delayMs = this.backoff.next(performance.now() - this.startedAt);
    const how = exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
    this.log.warn(`${this.spec.name} ${how}; restarting it in ${delayMs} ms`, {
      process: this.spec.name,
      code: exit.code,
      signal: exit.signal,
      restartInMs: delayMs,
      restarts: this.restarts,
    });
    this.restartTimer = setTimeout(() => this.restart(), delayMs);
  }

  private restart(): void {
    if (this.stopping) return;
    this.restarts++;
    const child = (this.child = this.start());
    let gone = false;
    void child.exited.then(() => (gone = true));
    void waitReady(this.spec.readyUrl, Date.now() + this.readyTimeoutMs, child).then(
      () => this.log.info(`${this.spec.name} is ready again`, { process: this.spec.name, pid: child.pid, restarts: this.restarts }),
      // An exit is reported by start()'s watcher; only a start slower than the timeout is said here.
      () => {
        if (!gone && !this.stopping) this.log.warn(`${this.spec.name} is not ready ${this.readyTimeoutMs} ms after its restart`, { process: this.spec.name, pid: child.pid });
      },
    );
  }
}
