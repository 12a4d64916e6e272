import { stdoutSink } from '../common/log.js';
import type { LineSink } from '../common/line-batch.js';

/**
 * The router's access log: one JSON line per request, the same shape as common/log.ts lines
 * (`time`, `level`, `msg: "request"`, the base fields, then the request's), written without
 * building an object for JSON.stringify, into the same sink as the other log lines (batched on
 * stdout: common/line-batch.ts). A line with an error code is urgent. Every request is logged;
 * nothing is sampled.
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
  private lastMs = 0;
  private lastIso = '';
  private readonly prefix: string;

  /** `base` are the logger's fixed fields (e.g. `{ component: 'router' }`). */
  constructor(
    base: Record<string, string>,
    private readonly write: LineSink = stdoutSink,
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
    line += `,"status":${e.status},"durationMs":${e.durationMs}}`;
    this.write(line, e.error !== undefined);
  }
}
