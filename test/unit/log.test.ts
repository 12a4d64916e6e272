import { createLogger, LOG_LEVELS, logs, type LogLevel } from '../../common/log.js';

function capture(level: LogLevel) {
  const lines: { level: string; msg: string; urgent: boolean; fields: Record<string, unknown> }[] = [];
  const log = createLogger({ component: 'test' }, (line, urgent) => {
    const { level: l, msg, ...fields } = JSON.parse(line) as Record<string, unknown>;
    lines.push({ level: String(l), msg: String(msg), urgent, fields });
  }, level);
  return { log, lines };
}

describe('logger levels', () => {
  it('writes every level at info, warnings and errors at warn, errors alone at error', () => {
    const written = (level: LogLevel): string[] => {
      const { log, lines } = capture(level);
      log.info('i');
      log.warn('w');
      log.error('e');
      return lines.map((l) => `${l.level}:${l.msg}`);
    };
    expect(written('info')).toEqual(['info:i', 'warn:w', 'error:e']);
    expect(written('warn')).toEqual(['warn:w', 'error:e']);
    expect(written('error')).toEqual(['error:e']);
  });

  it('gives a child its parent’s level and fields', () => {
    const { log, lines } = capture('warn');
    const child = log.child({ model: 'm1' });
    child.info('dropped');
    child.warn('kept', { reason: 'x' });
    expect(lines).toEqual([{ level: 'warn', msg: 'kept', urgent: true, fields: { time: expect.any(String), component: 'test', model: 'm1', reason: 'x' } }]);
  });

  it('does not build a dropped line', () => {
    const { log } = capture('warn');
    const fields = {
      get costly(): string {
        throw new Error('built');
      },
    };
    expect(() => log.info('dropped', fields)).not.toThrow();
    expect(() => log.warn('kept', fields)).toThrow('built');
  });

  it('orders the levels from least to most severe', () => {
    expect(LOG_LEVELS.filter((l) => logs('warn', l))).toEqual(['warn', 'error']);
    expect(LOG_LEVELS.filter((l) => logs('info', l))).toEqual(LOG_LEVELS);
  });
});
