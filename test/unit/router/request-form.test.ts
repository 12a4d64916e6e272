import { ModelmuxError } from '../../../common/errors.js';
import { parseModelId } from '../../../common/model-id.js';
import { endToEndFields, scanRequestHeaders } from '../../../router/http1/hop-headers.js';
import { MODEL_HEADERS, parseRequest, type HeaderBag } from '../../../common/request-grammar.js';
import { parseStaticRoutes } from '../../../router/discovery/static-discovery.js';

/** The grammar as the router reads a request's target: `rest` is the path below the route prefix, '' its root. */
const parseRequestForm = (method: string, rest: string, headers: HeaderBag) => parseRequest(method, rest === '' ? '/' : rest, headers);

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof ModelmuxError) return err.code;
    throw err;
  }
  return undefined;
}

describe('parseRequestForm', () => {
  it('reads the model id from the V2 path, percent-decoded', () => {
    expect(parseRequestForm('POST', '/v2/models/m1/infer', {})).toEqual({ form: 'v2', model: 'm1' });
    expect(parseRequestForm('GET', '/v2/models/m%3A1', {})).toEqual({ form: 'v2', model: 'm:1' });
    // A version is a model of its own to place: the key is computed from the path alone.
    expect(parseRequestForm('GET', '/v2/models/m1/versions/2/ready', {})).toEqual({ form: 'v2', model: 'm1@2' });
    expect(parseRequestForm('POST', '/v2/models/m1@2/infer', {})).toEqual({ form: 'v2', model: 'm1@2' });
  });

  it('routes a repository load like a request for its model, and tells the index and unloads apart for the fan-out', () => {
    expect(parseRequestForm('POST', '/v2/repository/models/m1/load', {})).toEqual({ form: 'v2', model: 'm1', repository: 'load' });
    expect(parseRequestForm('POST', '/v2/repository/models/m1/unload', {})).toEqual({ form: 'v2', model: 'm1', repository: 'unload' });
    expect(parseRequestForm('POST', '/v2/repository/index', {})).toEqual({ form: 'other', repository: 'index' });
  });

  it('reads the Ray header in both spellings on POST /', () => {
    expect(parseRequestForm('POST', '/', { serve_multiplexed_model_id: 'a' })).toEqual({ form: 'ray', model: 'a' });
    expect(parseRequestForm('POST', '', { 'serve-multiplexed-model-id': 'b' })).toEqual({ form: 'ray', model: 'b' });
  });

  it('reads the SageMaker target model header on /invocations', () => {
    expect(parseRequestForm('POST', '/invocations', { 'x-amzn-sagemaker-target-model': 'c' })).toEqual({ form: 'sagemaker', model: 'c' });
  });

  it('passes paths of the grammar without a model through', () => {
    expect(parseRequestForm('GET', '/v2/health/ready', {})).toEqual({ form: 'other', model: undefined });
    expect(parseRequestForm('GET', '/models', {})).toEqual({ form: 'other', model: undefined });
  });

  it('refuses paths the grammar lacks with not_found, the route prefix alone being the root', () => {
    expect(codeOf(() => parseRequestForm('GET', '', {}))).toBe('not_found');
    expect(codeOf(() => parseRequestForm('POST', '/V2/MODELS/m1/INFER', {}))).toBe('not_found');
    expect(codeOf(() => parseRequestForm('POST', '/invocations/', { 'x-amzn-sagemaker-target-model': 'c' }))).toBe('not_found');
    expect(codeOf(() => parseRequestForm('POST', '//', { serve_multiplexed_model_id: 'a' }))).toBe('not_found');
  });

  it('refuses a model header named in Connection', () => {
    expect(codeOf(() => parseRequestForm('POST', '/', { serve_multiplexed_model_id: 'a', connection: 'serve_multiplexed_model_id' }))).toBe('model_header_in_connection');
  });

  it('refuses malformed and missing ids with their catalogue codes', () => {
    expect(codeOf(() => parseRequestForm('POST', '/v2/models/..%2Fetc/infer', {}))).toBe('invalid_model_id');
    expect(codeOf(() => parseRequestForm('POST', '/v2/models/%E0%A4%A/infer', {}))).toBe('invalid_model_id');
    expect(codeOf(() => parseRequestForm('POST', '/', { serve_multiplexed_model_id: 'a/b' }))).toBe('invalid_model_id');
    expect(codeOf(() => parseRequestForm('POST', '/', {}))).toBe('missing_model_id');
    expect(codeOf(() => parseRequestForm('POST', '/invocations', {}))).toBe('missing_model_id');
    expect(codeOf(() => parseRequestForm('POST', '/invocations', { 'x-amzn-sagemaker-target-model': 'x'.repeat(201) }))).toBe('invalid_model_id');
  });
});

describe('model ids at the router edge', () => {
  it('accepts and refuses exactly what parseModelId does, with its reason', () => {
    const ids = ['m1', 'a.b', 'a..b', '.', '..', '', 'x'.repeat(200), 'x'.repeat(201), 'a/b', 'a b', 'é', 'a~b@c:d+e=f-g_h', '.hidden', 'a.', 'a\u0000'];
    for (const id of ids) {
      const schema = parseModelId(id);
      let fast: string | undefined;
      try {
        fast = parseRequestForm('POST', '/', { serve_multiplexed_model_id: id }).model;
      } catch (err) {
        if (!(err instanceof ModelmuxError)) throw err;
        expect(err.message).toBe(schema.ok ? '' : schema.reason);
      }
      expect(fast).toBe(schema.ok ? id : undefined);
    }
  });
});

describe('scanRequestHeaders', () => {
  it('forwards end-to-end headers in one pass and picks out what the proxy reads', () => {
    const scanned = scanRequestHeaders(
      [
        'Host',
        'router',
        'Connection',
        'keep-alive, X-Secret-Hop',
        'X-Secret-Hop',
        '1',
        'Content-Length',
        '12',
        'Content-Type',
        'application/json',
        'X-Request-Id',
        'r1',
        'X-Forwarded-For',
        '10.0.0.1',
        'x-forwarded-for',
        '10.0.0.2',
        'serve_multiplexed_model_id',
        'm1',
        'TE',
        'trailers',
        'Expect',
        '100-continue',
        'Accept',
        'a',
        'Accept',
        'b',
      ],
      MODEL_HEADERS,
    );
    expect(scanned).toEqual({
      forward: ['content-type', 'application/json', 'serve_multiplexed_model_id', 'm1', 'accept', 'a', 'accept', 'b'],
      requestId: 'r1',
      forwardedFor: '10.0.0.1, 10.0.0.2',
      contentLength: '12',
      modelHeaders: { connection: 'keep-alive, X-Secret-Hop', serve_multiplexed_model_id: 'm1' },
    });
  });

  it('joins repeated model and Connection fields as node:http does, so the grammar reads what the replica reads', () => {
    const scanned = scanRequestHeaders(
      ['serve_multiplexed_model_id', 'a', 'Connection', 'keep-alive', 'Serve_Multiplexed_Model_Id', 'b', 'connection', 'serve-multiplexed-model-id', 'serve-multiplexed-model-id', 'c'],
      MODEL_HEADERS,
    );
    expect(scanned.modelHeaders).toEqual({ serve_multiplexed_model_id: 'a, b', connection: 'keep-alive, serve-multiplexed-model-id', 'serve-multiplexed-model-id': 'c' });
    expect(codeOf(() => parseRequestForm('POST', '/', scanned.modelHeaders))).toBe('model_header_in_connection');
  });
});

describe('endToEndFields', () => {
  it('drops hop-by-hop headers, those Connection names, and the one the proxy sets, keeping repeated fields', () => {
    const out = endToEndFields(
      [
        'connection',
        'keep-alive, x-secret-hop',
        'keep-alive',
        'timeout=5',
        'transfer-encoding',
        'chunked',
        'upgrade',
        'websocket',
        'te',
        'trailers',
        'x-secret-hop',
        '1',
        'set-cookie',
        'a=1',
        'content-type',
        'application/json',
        'x-request-id',
        'r1',
        'set-cookie',
        'b=2',
        'connection',
        'x-other',
      ],
      'x-request-id',
    );
    expect(out).toEqual(['set-cookie', 'a=1', 'content-type', 'application/json', 'set-cookie', 'b=2']);
  });

  it('keeps everything end to end when Connection names nothing', () => {
    expect(endToEndFields(['connection', 'close', 'x-a', '1', 'x-b', '2'], 'x-request-id')).toEqual(['x-a', '1', 'x-b', '2']);
  });
});

describe('parseStaticRoutes', () => {
  it('parses several routes with several replicas each', () => {
    expect(parseStaticRoutes('/wine=http://127.0.0.1:1,http://127.0.0.1:2/; /beer=http://127.0.0.2:3')).toEqual({
      routes: [
        { prefix: '/wine', urls: ['http://127.0.0.1:1', 'http://127.0.0.1:2'] },
        { prefix: '/beer', urls: ['http://127.0.0.2:3'] },
      ],
      problems: [],
    });
  });

  it('reports every problem at once', () => {
    const { problems } = parseStaticRoutes('wine=ftp://x;/ok=');
    expect(problems).toEqual([
      'route "wine=ftp://x": prefix must be one path segment such as /wine',
      'route "wine": "ftp://x" is not an http:// URL',
      'route "wine" lists no replica URL',
      'route "/ok" lists no replica URL',
    ]);
  });
});
