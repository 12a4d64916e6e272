import { IsoTime } from './iso-time.js';
import { LineBatch, type LineSink } from './line-batch.js';

/** One JSON object per line on stdout: what log shippers in a cluster expect. */
export type LogFields = Record<string, unknown>;

export interface Logger {
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
}

const stdoutBatch = new LineBatch((chunk) => void process.stdout.write(chunk));
let flushOnExit = false;

/**
 * The process's stdout in batches: info lines up to 50 ms late, warnings and errors at once,
 * everything buffered written on exit (a SIGKILL can lose the last 50 ms of info lines). The
 * exit hook is added on first use, so a module that only imports this adds no listener.
 */
export const stdoutSink: LineSink = (line, urgent) => {
  if (!flushOnExit) {
    flushOnExit = true;
    process.once('exit', stdoutBatch.flush);
  }
  stdoutBatch.add(line, urgent);
};

/** Least severe first: a process logs the lines of its level and of the levels after it. */
export const LOG_LEVELS = ['info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Whether a process at `level` writes lines of `line`'s level. */
export function logs(level: LogLevel, line: LogLevel): boolean {
  return LOG_LEVELS.indexOf(line) >= LOG_LEVELS.indexOf(level);
}

const skip = (): void => undefined;

/**
 * One clock for every line of the process, the loggers' and the router's access log: lines a
 * few microseconds apart share a second's formatting.
 */
export const lineTime = new IsoTime();

/** `{"a":1,"b":2}` → `,"a":1,"b":2`; `{}` → ``: an object's members, to follow other members of a line. */
export const members = (json: string): string => (json.length > 2 ? `,${json.slice(1, -1)}` : '');

/**
 * Lines below `level` are not built at all: a busy replica's info lines cost CPU, not only log
 * volume. A line is built as text, the base fields serialized once per logger: merging them
 * into one object per line for JSON.stringify, with a Date formatted each time, cost a load's
 * four lines 7.1 µs in a loop against 3.8 as text, and a replica about 6 µs more per load. A
 * line whose fields repeat a base field or `time`, `level` or `msg` is still built from the
 * merged object, so the later value wins and no name appears twice.
 */
export function createLogger(base: LogFields = {}, write: LineSink = stdoutSink, level: LogLevel = 'info'): Logger {
  const baseMembers = members(JSON.stringify(base));
  const taken = new Set(['time', 'level', 'msg', ...Object.keys(base)]);
  const emit =
    (lineLevel: LogLevel) =>
    (msg: string, fields?: LogFields): void => {
      const now = lineTime.format(Date.now());
      let line: string;
      if (fields !== undefined && repeats(fields, taken)) {
        line = JSON.stringify({ time: now, level: lineLevel, msg, ...base, ...fields });
      } else {
        const own = fields === undefined ? '' : members(JSON.stringify(fields));
        line = `{"time":"${now}","level":"${lineLevel}","msg":${JSON.stringify(msg)}${baseMembers}${own}}`;
      }
      write(line, lineLevel !== 'info');
    };
  return {
    info: logs(level, 'info') ? emit('info') : skip,
    warn: logs(level, 'warn') ? emit('warn') : skip,
    error: emit('error'),
    child: (f) => createLogger({ ...base, ...f }, write, level),
  };
}

function repeats(fields: LogFields, taken: ReadonlySet<string>): boolean {
  for (const k in fields) if (taken.has(k)) return true;
  return false;
}

export const silentLogger: Logger = createLogger({}, () => undefined);
