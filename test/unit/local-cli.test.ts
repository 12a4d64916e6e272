import { exampleModelIds, parseDestination } from '../../cli/example-models.js';
import { bannerText, boto3Command, curlCommands, tritonGrpcCommand } from '../../cli/local-banner.js';
import { worthShowing } from '../../cli/local-processes.js';
import { createLogger } from '../../common/log.js';
import { AccessLog } from '../../router/exchange/access-log.js';

describe('modelmux models destinations', () => {
  it('reads s3 URIs, file URIs and plain paths, and refuses other schemes', () => {
    expect(parseDestination('s3://models/wine/v1/', '/work')).toEqual({ kind: 's3', bucket: 'models', prefix: 'wine/v1' });
    expect(parseDestination('s3://models', '/work')).toEqual({ kind: 's3', bucket: 'models', prefix: '' });
    expect(parseDestination('file:///srv/models', '/work')).toEqual({ kind: 'file', dir: '/srv/models' });
    expect(parseDestination('models', '/work')).toEqual({ kind: 'file', dir: '/work/models' });
    expect(parseDestination('https://example.com/x', '/work')).toHaveProperty('error');
    expect(parseDestination('s3://Bad_Bucket/x', '/work')).toHaveProperty('error');
  });

  it('names the example models <prefix>0 … <prefix>N-1 and refuses a prefix that makes invalid ids', () => {
    expect(exampleModelIds({ prefix: 'wine-', count: 3 })).toEqual(['wine-0', 'wine-1', 'wine-2']);
    expect(() => exampleModelIds({ prefix: 'a/b-', count: 1 })).toThrow(/invalid/);
  });
});

describe('the local mode banner', () => {
  const input = {
    routerUrl: 'http://127.0.0.1:8000',
    routePrefix: '/wine',
    replicaUrls: ['http://127.0.0.1:9001', 'http://127.0.0.1:9002'],
    maxModels: 3,
    modelSource: 'file:///tmp/models',
    exampleIds: ['wine-0', 'wine-1', 'wine-2'] as const,
    exampleModelCount: 20,
    restart: { initialMs: 500, maxMs: 30_000, resetAfterMs: 60_000 },
  };

  it('prints one curl command per request form, each naming a different model', () => {
    const c = curlCommands(input);
    expect(c.v2).toContain("'http://127.0.0.1:8000/wine/v2/models/wine-0/infer'");
    expect(c.ray).toContain("-H 'serve_multiplexed_model_id: wine-1'");
    expect(c.sagemaker).toContain("-H 'X-Amzn-SageMaker-Target-Model: wine-2'");
    const text = bannerText(input);
    for (const cmd of Object.values(c)) expect(text).toContain(`  ${cmd}\n`);
    expect(text).toContain('  replicas http://127.0.0.1:9001 http://127.0.0.1:9002');
  });

  it("prints a boto3 invoke_endpoint line at the router's root, the route prefix as the endpoint name", () => {
    const line = boto3Command('http://127.0.0.1:8000', '/wine', 'wine-2');
    expect(line).toMatch(/^python3 -c '.*'$/);
    expect(line).toContain('endpoint_url="http://127.0.0.1:8000"');
    expect(line).toContain('EndpointName="wine", TargetModel="wine-2"');
    expect(bannerText(input)).toContain(`  ${line}\n`);
  });

  it('prints a Triton gRPC client line against the router’s gRPC port when it serves one', () => {
    const line = tritonGrpcCommand('127.0.0.1:8001', 'wine-1');
    expect(line).toMatch(/^python3 -c '.*'$/);
    expect(line).toContain('g.InferenceServerClient("127.0.0.1:8001")');
    expect(line).toContain('c.infer("wine-1", [x]).as_numpy("quality")');
    expect(bannerText({ ...input, routerGrpc: '127.0.0.1:8001' })).toContain(`  ${line}\n`);
    expect(bannerText(input)).not.toContain('tritonclient');
  });

  it("points at the router's admin port for metrics and the repository API, when it has one", () => {
    const text = bannerText({ ...input, adminUrl: 'http://127.0.0.1:8002' });
    expect(text).toContain('  metrics  http://127.0.0.1:8002/metrics\n');
    expect(text).toContain('  admin    http://127.0.0.1:8002 (');
    expect(bannerText(input)).not.toMatch(/metrics|admin/);
  });

  it('says that a process that dies is restarted, with the backoff, and how to stop', () => {
    const text = bannerText(input);
    expect(text).toContain('A replica or the router that dies is restarted after 0.5 s, doubling to 30 s while it keeps dying;');
    expect(text).toContain('Press Ctrl-C to stop.');
  });

  it('quotes a single quote in a URL so the printed command still pastes into a shell', () => {
    const c = curlCommands({ ...input, routerUrl: "http://h:1/it's" });
    expect(c.v2.startsWith(`curl -sS 'http://h:1/it'\\''s/wine/v2/models/wine-0/infer'`)).toBe(true);
  });
});

describe("which of a child's lines modelmux local shows", () => {
  const written = (use: (sink: (line: string) => void) => void): string => {
    const lines: string[] = [];
    use((line) => lines.push(line));
    return lines[0] as string;
  };
  const info = written((sink) => createLogger({ component: 'replica' }, sink).info("Loading model 'm1'.", { model: 'm1' }));
  const warn = written((sink) => createLogger({ component: 'replica' }, sink).warn('cannot publish', { reason: 'x' }));
  const access = written((sink) =>
    new AccessLog({ component: 'router' }, sink).request({
      requestId: 'r1',
      method: 'POST',
      path: '/wine/v2/models/m1/infer',
      route: '/wine',
      model: 'm1',
      form: 'v2',
      replica: 'a',
      placement: 'holder',
      waitedMs: undefined,
      tries: 1,
      error: undefined,
      status: 200,
      durationMs: 1.5,
    }),
  );

  it('hides info lines of the loggers and the access log unless verbose, and shows warnings and anything not JSON', () => {
    expect(worthShowing(info, false)).toBe(false);
    expect(worthShowing(access, false)).toBe(false);
    expect(worthShowing(warn, false)).toBe(true);
    expect(worthShowing('Error: boom', false)).toBe(true);
    expect(worthShowing('   ', false)).toBe(false);
    for (const line of [info, access, warn]) expect(worthShowing(line, true)).toBe(true);
  });

  it('reads the level of JSON lines in another field order', () => {
    expect(worthShowing('{"level":"info","msg":"x"}', false)).toBe(false);
    expect(worthShowing('{"msg":"x","level":"error"}', false)).toBe(true);
    expect(worthShowing('{"time":"t","msg":"a \\"level\\":\\"info\\"","level":"warn"}', false)).toBe(true);
  });
});
