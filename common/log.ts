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

export function createLogger(base: LogFields = {}, write: LineSink = stdoutSink): Logger {
  const emit = (level: string, msg: string, fields?: LogFields): void => {
    write(JSON.stringify({ time: new Date().toISOString(), level, msg, ...base, ...fields }), level !== 'info');
  };
  return {
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (f) => createLogger({ ...base, ...f }, write),
  };
}

export const silentLogger: Logger = createLogger({}, () => undefined);
