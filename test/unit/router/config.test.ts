import { ConfigError, HelpRequested } from '../../../common/config.js';
import { parseRouterConfig } from '../../../router/config.js';

function problems(argv: string[], env: NodeJS.ProcessEnv = {}): string[] {
  try {
    parseRouterConfig(argv, env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe('router configuration', () => {
  it('reads static routes from the flag or the environment, with defaults for the rest', () => {
    const c = parseRouterConfig([], { MODELMUX_ROUTES: '/wine=http://127.0.0.1:9001' });
    expect(c).toMatchObject({ discovery: 'static', port: 8000, maxOngoingRequests: 16, matchTimeoutSeconds: 1, maxBodyBytes: 10 * 1024 * 1024, maxQueue: 1024 });
    expect(c.staticRoutes).toEqual([{ prefix: '/wine', urls: ['http://127.0.0.1:9001'] }]);
    expect(parseRouterConfig(['--routes', '/a=http://127.0.0.1:1', '--max-body-bytes', '1Ki'], { MODELMUX_ROUTES: '/b=http://127.0.0.1:2' })).toMatchObject({ maxBodyBytes: 1024, staticRoutes: [{ prefix: '/a' }] });
  });

  it('takes a log level from the flag or MODELMUX_LOG_LEVEL, info by default, and names the three it knows', () => {
    const routes = { MODELMUX_ROUTES: '/wine=http://127.0.0.1:9001' };
    expect(parseRouterConfig([], routes).logLevel).toBe('info');
    expect(parseRouterConfig([], { ...routes, MODELMUX_LOG_LEVEL: 'warn' }).logLevel).toBe('warn');
    expect(parseRouterConfig(['--log-level', 'error'], { ...routes, MODELMUX_LOG_LEVEL: 'warn' }).logLevel).toBe('error');
    expect(problems(['--log-level', 'debug'], routes)).toEqual([expect.stringMatching(/^--log-level\/MODELMUX_LOG_LEVEL: .*info.*warn.*error/)]);
  });

  it('needs no routes with kube discovery', () => {
    expect(parseRouterConfig(['--discovery', 'kube', '--namespace', 'ml'], {})).toMatchObject({ discovery: 'kube', namespace: 'ml', staticRoutes: [] });
  });

  it('reports every problem at once', () => {
    expect(problems(['--port', 'x', '--routes', 'wine=http://a', '--bogus'])).toEqual([
      'unknown flag --bogus',
      expect.stringContaining('--port/MODELMUX_PORT'),
      expect.stringContaining('prefix must be one path segment'),
    ]);
    expect(problems([])).toEqual([expect.stringContaining('static discovery needs --routes')]);
  });

  it('prints help listing the flags', () => {
    expect(() => parseRouterConfig(['--help'], {})).toThrow(HelpRequested);
  });
});
