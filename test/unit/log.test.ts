import { expect } from '@jest/globals';
import { createLogger, LOG_LEVELS, logs, type LogLevel } from '../../common/log.js';

function capture(level: LogLevel) {
  const lines: { level: string; msg: string; urgent: boolean; fields: Record<string, unknown> }[] = [];
  const log = createLogger(
    { component: 'test' },
    (line, urgent) => {
      const { level: l, msg, ...fields } = JSON.parse(line) as Record<string, unknown>;
      lines.push({ level: String(l), msg: String(msg), urgent, fields });
    },
    level,
  );
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

  it('writes what JSON.stringify writes for the merged fields, in the same order', () => {
    const raw: string[] = [];
    const log = createLogger({ component: 'test', pod: 'p "0"' }, (line) => void raw.push(line), 'info');
    const cases: [string, Record<string, unknown> | undefined][] = [
      ['plain', undefined],
      ['empty', {}],
      ['quote " backslash \\ newline \n tab \t é \u2028 \ud83d', { model: 'm1', event: 'load-end', durationMs: 0.31, bytes: 5_200_000 }],
      ['odd values', { nothing: undefined, nul: null, no: false, nested: { a: [1, 'two', { b: null }] }, big: 1e21, neg: -0.5 }],
      ['only undefined', { nothing: undefined }],
    ];
    for (const [msg, fields] of cases) log.info(msg, fields);
    log.child({ model: 'm2', n: 3 }).error('from a child', { reason: 'x' });
    expect(raw).toHaveLength(cases.length + 1);
    raw.forEach((line, i) => {
      const { time } = JSON.parse(line) as { time: string };
      expect(new Date(time).toISOString()).toBe(time);
      const [msg, fields] = cases[i] ?? ['from a child', { model: 'm2', n: 3, reason: 'x' }];
      expect(line).toBe(JSON.stringify({ time, level: i < cases.length ? 'info' : 'error', msg, component: 'test', pod: 'p "0"', ...fields }));
    });
  });

  it('lets a field replace a base field or a line’s own name once, as the merged object would', () => {
    const raw: string[] = [];
    const log = createLogger({ component: 'test', model: 'base' }, (line) => void raw.push(line), 'info');
    log.info('m', { model: 'mine', extra: 1 });
    log.info('m', { msg: 'replaced' });
    const names = (l: string): number[] => ['"model":', '"msg":'].map((name) => l.split(name).length - 1);
    expect(raw.map(names)).toEqual([
      [1, 1],
      [1, 1],
    ]);
    expect(raw.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      { time: expect.any(String), level: 'info', msg: 'm', component: 'test', model: 'mine', extra: 1 },
      { time: expect.any(String), level: 'info', msg: 'replaced', component: 'test', model: 'base' },
    ]);
  });
});
