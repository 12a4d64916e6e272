import { expected, v2Body, wineRows } from './wine-requests.js';

export interface LoadTally {
  readonly ok: number;
  readonly failed: number;
  /** Failures by cause: `status <code> <error code>`, `wrong answer`, or the network error's code. */
  readonly causes: Readonly<Record<string, number>>;
}

export interface LoadGenerator {
  /**
   * Sets how many clients run, each sending its next request as soon as the last is answered
   * (a closed loop: the in-flight count is the client count, the autoscaling signal). Clients
   * beyond `n` stop after their request in flight.
   */
  setClients(n: number): void;
  /** Counts since the last mark (or the start), and starts a new count. */
  mark(): LoadTally;
  /** Stops every client once its request is answered; resolves with the counts since the last mark. */
  stop(): Promise<LoadTally>;
}

export interface LoadOptions {
  /** Router base URL and route prefix, e.g. http://127.0.0.1:4000/wine. */
  readonly url: string;
  /** Models the clients take in turn. */
  readonly models: readonly string[];
}

const ROWS_PER_REQUEST = 2;
/** A request unanswered after this long counts as failed. */
const REQUEST_TIMEOUT_MS = 30_000;
const TOLERANCE = 1e-4;

/**
 * Closed-loop clients sending V2 inference requests through the router. A request counts as
 * ok only with a 200 and the model's right answer (computed here from the model's weights).
 */
export function startLoad(opts: LoadOptions): LoadGenerator {
  let wanted = 0;
  let seq = 0;
  let ok = 0;
  let failed = 0;
  let causes: Record<string, number> = {};
  const running = new Set<Promise<void>>();
  const fail = (cause: string): void => {
    failed++;
    causes[cause] = (causes[cause] ?? 0) + 1;
  };

  const once = async (): Promise<void> => {
    const n = seq++;
    const model = opts.models[n % opts.models.length] ?? '';
    const rows = wineRows(ROWS_PER_REQUEST, n % 97);
    try {
      const res = await fetch(`${opts.url}/v2/models/${model}/infer`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(v2Body(rows)),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      const body = (await res.json().catch(() => ({}))) as { outputs?: { data?: number[] }[]; error?: string };
      if (res.status !== 200) return fail(`status ${res.status} ${body.error ?? ''}`.trim());
      const got = body.outputs?.[0]?.data ?? [];
      const want = expected(model, rows);
      if (got.length !== want.length || got.some((v, i) => Math.abs(v - (want[i] ?? NaN)) > TOLERANCE * Math.max(1, Math.abs(want[i] ?? 0)))) return fail('wrong answer');
      ok++;
    } catch (err) {
      const e = err as { name?: string; cause?: { code?: string } };
      fail(e.name === 'TimeoutError' ? 'timeout' : (e.cause?.code ?? e.name ?? 'error'));
    }
  };

  // Client ids still looping; a client lowered away but still finishing is not started twice.
  const active = new Set<number>();
  const client = async (id: number): Promise<void> => {
    while (id < wanted) await once();
  };

  const setClients = (n: number): void => {
    wanted = n;
    for (let id = 0; id < n; id++) {
      if (active.has(id)) continue;
      active.add(id);
      const p = client(id).finally(() => {
        active.delete(id);
        running.delete(p);
      });
      running.add(p);
    }
  };

  const mark = (): LoadTally => {
    const tally = { ok, failed, causes };
    ok = 0;
    failed = 0;
    causes = {};
    return tally;
  };

  return {
    setClients,
    mark,
    stop: async () => {
      wanted = 0;
      await Promise.all(running);
      return mark();
    },
  };
}
