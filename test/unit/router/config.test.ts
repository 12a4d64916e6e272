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
    expect(c).toMatchObject({ discovery: 'static', port: 8000, maxOngoingRequests: 16, matchTimeoutSeconds: 1, maxBodyBytes: 8 * 1024 * 1024, maxQueue: 1024 });
    expect(c.staticRoutes).toEqual([{ prefix: '/wine', urls: ['http://127.0.0.1:9001'] }]);
    expect(parseRouterConfig(['--routes', '/a=http://127.0.0.1:1', '--max-body-bytes', '1Ki'], { MODELMUX_ROUTES: '/b=http://127.0.0.1:2' })).toMatchObject({
      maxBodyBytes: 1024,
      staticRoutes: [{ prefix: '/a' }],
    });
  });

  it('takes a log level from the flag or MODELMUX_LOG_LEVEL, info by default, and names the three it knows', () => {
    const routes = { MODELMUX_ROUTES: '/wine=http://127.0.0.1:9001' };
    expect(parseRouterConfig([], routes).logLevel).toBe('info');
    expect(parseRouterConfig([], { ...routes, MODELMUX_LOG_LEVEL: 'warn' }).logLevel).toBe('warn');
    expect(parseRouterConfig(['--log-level', 'error'], { ...routes, MODELMUX_LOG_LEVEL: 'warn' }).logLevel).toBe('error');
    expect(problems(['--log-level', 'debug'], routes)).toEqual([expect.stringMatching(/^--log-level\/MODELMUX_LOG_LEVEL: .*info.*warn.*error/)]);
  });

  it('bounds every phase of a client connection by default, and takes each bound from a flag or its variable', () => {
    const routes = { MODELMUX_ROUTES: '/wine=http://127.0.0.1:9001' };
    expect(parseRouterConfig([], routes)).toMatchObject({
      headersTimeoutMs: 30_000,
      bodyIdleTimeoutMs: 30_000,
      bodyTimeoutMs: 120_000,
      keepAliveTimeoutMs: 65_000,
      writeTimeoutMs: 30_000,
      slowReaderTimeoutMs: 1000,
      maxResponseBufferBytes: 8 * 1024 * 1024,
      maxBufferedBytes: 128 * 1024 * 1024,
      maxConnections: 10_000,
      maxConnectionsPerClient: 256,
    });
    const c = parseRouterConfig(['--body-idle-timeout-ms', '500', '--max-buffered-bytes', '64Mi', '--max-connections-per-client', '0'], {
      ...routes,
      MODELMUX_WRITE_TIMEOUT_MS: '2000',
      MODELMUX_MAX_CONNECTIONS: '50',
    });
    expect(c).toMatchObject({ bodyIdleTimeoutMs: 500, maxBufferedBytes: 64 * 1024 * 1024, maxConnectionsPerClient: 0, writeTimeoutMs: 2000, maxConnections: 50 });
    expect(problems(['--max-buffered-bytes', '0', '--headers-timeout-ms', '0', '--max-connections', '-1'], routes)).toEqual([
      expect.stringContaining('--headers-timeout-ms'),
      expect.stringContaining('--max-buffered-bytes'),
      expect.stringContaining('--max-connections'),
    ]);
  });

  it('bounds retries and adapts try timeouts by default, each knob from a flag or its variable, within range', () => {
    const routes = { MODELMUX_ROUTES: '/wine=http://127.0.0.1:9001' };
    expect(parseRouterConfig([], routes)).toMatchObject({
      tryTimeoutMs: 30_000,
      tryTimeoutFloorMs: 1000,
      tryTimeoutMultiple: 5,
      maxRetries: 2,
      retryBudgetPercent: 20,
      outlierConsecutiveFailures: 3,
      outlierEjectionMs: 2000,
      outlierMaxEjectionMs: 30_000,
      outlierMaxEjectedPercent: 50,
    });
    expect(parseRouterConfig(['--max-retries', '0', '--try-timeout-multiple', '2.5'], { ...routes, MODELMUX_OUTLIER_MAX_EJECTED_PERCENT: '34' })).toMatchObject({
      maxRetries: 0,
      tryTimeoutMultiple: 2.5,
      outlierMaxEjectedPercent: 34,
    });
    expect(problems(['--max-retries', '6', '--retry-budget-percent', '101', '--outlier-consecutive-failures', '0'], routes)).toEqual([
      expect.stringContaining('--max-retries/MODELMUX_MAX_RETRIES'),
      expect.stringContaining('--retry-budget-percent/MODELMUX_RETRY_BUDGET_PERCENT'),
      expect.stringContaining('--outlier-consecutive-failures/MODELMUX_OUTLIER_CONSECUTIVE_FAILURES'),
    ]);
  });

  it('listens on admin port 8002 at --host by default, takes another or none, and a repository token only of 16 to 256 token characters, never echoed', () => {
    const routes = { MODELMUX_ROUTES: '/wine=http://127.0.0.1:9001' };
    const c = parseRouterConfig([], routes);
    expect([c.adminPort, c.adminHost, c.repositoryApiToken]).toEqual([8002, undefined, undefined]);
    expect(parseRouterConfig(['--admin-port=-1', '--admin-host', '127.0.0.1'], { ...routes, MODELMUX_REPOSITORY_API_TOKEN: 'abcdefghijklmnop' })).toMatchObject({
      adminPort: -1,
      adminHost: '127.0.0.1',
      repositoryApiToken: 'abcdefghijklmnop',
    });
    for (const token of ['short-secret', 'sixteen chars + space', 'x'.repeat(257)]) {
      const found = problems([], { ...routes, MODELMUX_REPOSITORY_API_TOKEN: token });
      expect(found).toEqual([expect.stringContaining('--repository-api-token/MODELMUX_REPOSITORY_API_TOKEN')]);
      expect(found.join()).not.toContain(token);
    }
    expect(problems(['--admin-port', '-2'], routes)).toEqual([expect.stringContaining('--admin-port')]);
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
