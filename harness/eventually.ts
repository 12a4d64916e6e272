import { setTimeout as sleep } from 'node:timers/promises';

/**
 * What a check may return: anything but a boolean. A check states its condition by throwing
 * (a jest `expect`, or an `Error` that says what is still wrong); a check that answered
 * `false` would never throw, so the wait would end at once having waited on nothing. The
 * `then?: never` keeps a `Promise<boolean>` from passing as an object.
 */
export type CheckResult = string | number | bigint | symbol | null | undefined | void | (object & { then?: never });

/**
 * Retries `check` until it returns without throwing, and returns its value; after `timeoutMs`
 * rethrows the last failure, so a timed-out test says what was still wrong. A check that
 * returns a boolean is refused at once (and by the type checker): see {@link CheckResult}.
 */
export async function eventually<T extends CheckResult>(check: () => T | Promise<T>, timeoutMs = 30_000, intervalMs = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let value: T;
    try {
      value = await check();
    } catch (err) {
      if (Date.now() >= deadline) throw err;
      await sleep(intervalMs);
      continue;
    }
    if (typeof value === 'boolean') throw new TypeError('eventually: the check returned a boolean; state its condition as an assertion that throws instead');
    return value;
  }
}
