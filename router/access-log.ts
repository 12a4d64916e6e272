/**
 * The router's access log: one JSON line per request, the same shape as common/log.ts lines
 * (`time`, `level`, `msg: "request"`, the base fields, then the request's), written without
 * building an object for JSON.stringify, and in batches: a line waits at most `flushMs` (or
 * until `maxBufferedChars` are buffered) so that one write carries many lines, instead of one
 * write per request. A line with an error code goes out at once, with what was buffered before
 * it. Every request is logged; nothing is sampled. `flush()` before the process exits.
 */

/**
 * `requestId`, `method` and `model` are written without JSON escaping: the proxy passes only
 * values it validated (request id pattern or a UUID, an HTTP token, a model id), none of which
 * holds a quote, a backslash or a control character.
 */
export interface AccessEntry {
  requestId: string;
  method: string;
  path: string;
  /** Route prefix, or `none`. */
  route: string;
  model: string | undefined;
  form: string | undefined;
  replica: string | undefined;
  placement: string | undefined;
  waitedMs: number | undefined;
  tries: number | undefined;
  /** Catalogue code of the error, when the request failed. */
  error: string | undefined;
  status: number;
  durationMs: number;
}

const q = JSON.stringify as (s: string) => string;

export class AccessLog {
  private buffer = '';
  private timer: NodeJS.Timeout | undefined;
  private lastMs = 0;
  private lastIso = '';
  private readonly prefix: string;

  /**
   * `base` are the logger's fixed fields (e.g. `{ component: 'router' }`); `write` gets whole
   * lines, newline-terminated. Wall time comes from `Date.now`, like every other log line.
   */
  constructor(
    base: Record<string, string>,
    private readonly write: (chunk: string) => void = (s) => void process.stdout.write(s),
    private readonly flushMs = 50,
    private readonly maxBufferedChars = 64 * 1024,
  ) {
    let p = '","level":"info","msg":"request"';
    for (const [k, v] of Object.entries(base)) p += `,${q(k)}:${q(v)}`;
    this.prefix = p;
  }

  request(e: AccessEntry): void {
    const ms = Date.now();
    if (ms !== this.lastMs) {
      this.lastMs = ms;
      this.lastIso = new Date(ms).toISOString();
    }
    let line = `{"time":"${this.lastIso}${this.prefix},"requestId":"${e.requestId}","method":"${e.method}","path":${q(e.path)},"route":${q(e.route)}`;
    if (e.model !== undefined) line += `,"model":"${e.model}"`;
    if (e.form !== undefined) line += `,"form":"${e.form}"`;
    if (e.replica !== undefined) line += `,"replica":${q(e.replica)}`;
    if (e.placement !== undefined) line += `,"placement":"${e.placement}"`;
    if (e.waitedMs !== undefined) line += `,"waitedMs":${e.waitedMs}`;
    if (e.tries !== undefined) line += `,"tries":${e.tries}`;
    if (e.error !== undefined) line += `,"error":"${e.error}"`;
    line += `,"status":${e.status},"durationMs":${e.durationMs}}\n`;
    this.buffer += line;
    if (e.error !== undefined || this.buffer.length >= this.maxBufferedChars) this.flush();
    else if (this.timer === undefined) {
      this.timer = setTimeout(this.flush, this.flushMs);
      // Buffered lines never keep the process alive: the exit handler flushes them.
      this.timer.unref();
    }
  }

  /** Writes what is buffered now. */
  readonly flush = (): void => {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.buffer === '') return;
    const chunk = this.buffer;
    this.buffer = '';
    this.write(chunk);
  };
}
