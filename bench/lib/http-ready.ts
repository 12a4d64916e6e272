import { setTimeout as sleep } from 'node:timers/promises';
import type { Child } from './child.js';

/** Polls `url` until it answers 2xx; fails at the deadline or when `child` has exited. */
export async function waitHttpReady(url: string, timeoutMs: number, child?: Child): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child && (child.proc.exitCode !== null || child.proc.signalCode !== null)) {
      throw new Error(`process exited before ${url} was ready:\n${child.output().slice(-4000)}`);
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.ok) return;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) throw new Error(`${url} not ready after ${timeoutMs} ms${child ? `:\n${child.output().slice(-4000)}` : ''}`);
    await sleep(200);
  }
}
