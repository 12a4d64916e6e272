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

/** Lines below `level` are not built at all: a busy replica's info lines cost CPU, not only log volume. */
export function createLogger(base: LogFields = {}, write: LineSink = stdoutSink, level: LogLevel = 'info'): Logger {
  const emit =
    (lineLevel: LogLevel) =>
    (msg: string, fields?: LogFields): void => {
      write(JSON.stringify({ time: new Date().toISOString(), level: lineLevel, msg, ...base, ...fields }), lineLevel !== 'info');
    };
  return {
    info: logs(level, 'info') ? emit('info') : skip,
    warn: logs(level, 'warn') ? emit('warn') : skip,
    error: emit('error'),
    child: (f) => createLogger({ ...base, ...f }, write, level),
  };
}

export const silentLogger: Logger = createLogger({}, () => undefined);
