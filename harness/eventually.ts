import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Retries `check` until it returns without throwing, and returns its value; after `timeoutMs`
 * rethrows the last failure, so a timed-out test says what was still wrong.
 */
export async function eventually<T>(check: () => T | Promise<T>, timeoutMs = 30_000, intervalMs = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() >= deadline) throw err;
    }
    await sleep(intervalMs);
  }
}
