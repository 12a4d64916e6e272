import { exampleModelIds, parseDestination } from '../../cli/example-models.js';
import { bannerText, curlCommands } from '../../cli/local-banner.js';

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

  it('quotes a single quote in a URL so the printed command still pastes into a shell', () => {
    const c = curlCommands({ ...input, routerUrl: "http://h:1/it's" });
    expect(c.v2.startsWith(`curl -sS 'http://h:1/it'\\''s/wine/v2/models/wine-0/infer'`)).toBe(true);
  });
});
