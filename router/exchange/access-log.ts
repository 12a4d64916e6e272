import { lineTime, logs, members, stdoutSink, type LogLevel } from '../../common/log.js';
import type { LineSink } from '../../common/line-batch.js';

/**
 * The router's access log: one JSON line per request, the same shape as common/log.ts lines
 * (`time`, `level`, `msg: "request"`, the base fields, then the request's), written without
 * building an object for JSON.stringify, into the same sink as the other log lines (batched on
 * stdout: common/line-batch.ts). A failed request's line (one with an error code) is a warning,
 * written at once; the others are info lines. Every request is logged at level info; nothing is
 * sampled.
 */

/**
 * `requestId`, `method` and `model` are written without JSON escaping: the proxy passes only
 * values it validated (the request id pattern or its own ids, an HTTP token, a model id), none of which
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
  /** Logged to a tenth of a millisecond. */
  durationMs: number;
}

const q = JSON.stringify as (s: string) => string;

/** Quoted names kept at most; replica names change as pods come and go. */
const MAX_QUOTED = 1024;

/**
 * `ms` rounded to a tenth, printed as JSON prints that number: from integers, which V8 prints
 * from a cache, where printing a double was 1% of the router's CPU. Durations are not negative.
 */
function tenths(ms: number): string {
  const t = Math.round(ms * 10);
  const whole = Math.trunc(t / 10);
  const frac = t % 10;
  return frac === 0 ? `${whole}` : `${whole}.${frac}`;
}

export class AccessLog {
  /** The line's fields after `time`, for a served and for a failed request. */
  private readonly prefix: string;
  private readonly failedPrefix: string;
  private readonly writesServed: boolean;
  private readonly writesFailed: boolean;
  /** Route prefixes and replica names, a few repeated on every line: each quoted once. */
  private readonly quoted = new Map<string, string>();

  /** `base` are the logger's fixed fields (e.g. `{ component: 'router' }`). */
  constructor(
    base: Record<string, string>,
    private readonly write: LineSink = stdoutSink,
    level: LogLevel = 'info',
  ) {
    const fields = members(JSON.stringify(base));
    this.prefix = `","level":"info","msg":"request"${fields}`;
    this.failedPrefix = `","level":"warn","msg":"request"${fields}`;
    this.writesServed = logs(level, 'info');
    this.writesFailed = logs(level, 'warn');
  }

  request(e: AccessEntry): void {
    if (!(e.error === undefined ? this.writesServed : this.writesFailed)) return;
    let line = `{"time":"${lineTime.format(Date.now())}${e.error === undefined ? this.prefix : this.failedPrefix},"requestId":"${e.requestId}","method":"${e.method}","path":${q(e.path)},"route":${this.name(e.route)}`;
    if (e.model !== undefined) line += `,"model":"${e.model}"`;
    if (e.form !== undefined) line += `,"form":"${e.form}"`;
    if (e.replica !== undefined) line += `,"replica":${this.name(e.replica)}`;
    if (e.placement !== undefined) line += `,"placement":"${e.placement}"`;
    if (e.waitedMs !== undefined) line += `,"waitedMs":${e.waitedMs}`;
    if (e.tries !== undefined) line += `,"tries":${e.tries}`;
    if (e.error !== undefined) line += `,"error":"${e.error}"`;
    line += `,"status":${e.status},"durationMs":${tenths(e.durationMs)}}`;
    this.write(line, e.error !== undefined);
  }

  private name(s: string): string {
    let v = this.quoted.get(s);
    if (v === undefined) {
      if (this.quoted.size >= MAX_QUOTED) this.quoted.clear();
      v = q(s);
      this.quoted.set(s, v);
    }
    return v;
  }
}
