import type { ControlPlane } from './control-plane.js';

/** `kubectl get -o json` parsed; undefined when the object does not exist. */
export async function getJson<T = Record<string, unknown>>(cp: ControlPlane, args: readonly string[]): Promise<T | undefined> {
  try {
    return JSON.parse(await cp.kubectl(['get', ...args, '-o', 'json'])) as T;
  } catch (err) {
    if (err instanceof Error && /NotFound|not found/.test(err.message)) return undefined;
    throw err;
  }
}

/** Items of a list, e.g. `getItems(cp, ['pods', '-l', 'a=b'])`. */
export async function getItems<T = Record<string, unknown>>(cp: ControlPlane, args: readonly string[]): Promise<T[]> {
  return (await getJson<{ items: T[] }>(cp, args))?.items ?? [];
}
