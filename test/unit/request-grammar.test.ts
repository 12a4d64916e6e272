import { ModelmuxError } from '../../common/errors.js';
import { matchRequest, MODEL_HEADERS, modelHeaderInConnection, parseRequest, type HeaderBag } from '../../common/request-grammar.js';

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof ModelmuxError) return err.code;
    throw err;
  }
  return 'ok';
}

const ray = { serve_multiplexed_model_id: 'm1' };
const sagemaker = { 'x-amzn-sagemaker-target-model': 'm1' };

describe('the request grammar', () => {
  it.each([
    ['POST', '/v2/models/m1/infer', 'v2'],
    ['POST', '/v2/models/m1/versions/3/infer', 'v2'],
    ['GET', '/v2/models/m1', 'v2'],
    ['HEAD', '/v2/models/m1', 'v2'],
    ['GET', '/v2/models/m1/ready', 'v2'],
    ['GET', '/v2/models/m1/versions/3', 'v2'],
    ['GET', '/v2/models/m1/versions/3/ready', 'v2'],
    ['POST', '/', 'ray'],
    ['POST', '/invocations', 'sagemaker'],
    ['GET', '/v2', 'other'],
    ['GET', '/v2/health/live', 'other'],
    ['GET', '/v2/health/ready', 'other'],
    ['GET', '/models', 'other'],
    ['GET', '/metrics', 'other'],
    ['POST', '/v2/repository/index', 'other'],
    ['POST', '/v2/repository/models/m1/load', 'v2'],
    ['POST', '/v2/repository/models/m1/unload', 'v2'],
  ])('knows %s %s as the %s form', (method, path, form) => {
    expect(matchRequest(method, path)?.form).toBe(form);
  });

  it.each([
    ['POST', '/V2/MODELS/m1/INFER'],
    ['POST', '/v2/Models/m1/infer'],
    ['POST', '/v2/models/m1/Infer'],
    ['POST', '/v2/models/m1/infer/'],
    ['POST', '/v2/models//infer'],
    ['POST', '/v2/models/m1//infer'],
    ['POST', '//v2/models/m1/infer'],
    ['POST', '/v2/models/m1/versions//infer'],
    ['POST', '/v2/models/m1/versions/3/4/infer'],
    ['GET', '/v2/models/'],
    ['GET', '/v2/models/m1/'],
    ['GET', '/v2/models/m1/versions/3/ready/'],
    ['GET', '/v2/models/m1/other'],
    ['POST', '//'],
    ['POST', '/invocations/'],
    ['POST', '/Invocations'],
    ['POST', '//invocations'],
    ['GET', '/v2/health/ready/'],
    ['GET', '/METRICS'],
    ['GET', '/v2/'],
    ['GET', 'http://host/v2/models/m1'],
    ['GET', '*'],
    ['POST', '/v2/repository/index/'],
    ['POST', '/v2/repository/models/m1/load/'],
    ['POST', '/v2/repository/models//load'],
    ['POST', '/v2/repository/models/m1/reload'],
    ['POST', '/v2/repository/models/m1'],
  ])('has no %s %s: no other spelling of a path', (method, path) => {
    expect(matchRequest(method, path)).toBeUndefined();
    expect(codeOf(() => parseRequest(method, path, ray))).toBe('not_found');
  });

  it.each([
    ['GET', '/v2/models/m1/infer'],
    ['POST', '/v2/models/m1'],
    ['POST', '/v2/models/m1/ready'],
    ['GET', '/'],
    ['PUT', '/'],
    ['GET', '/invocations'],
    ['DELETE', '/invocations'],
    ['POST', '/models'],
    ['OPTIONS', '/v2/models/m1/infer'],
    ['GET', '/v2/repository/index'],
    ['GET', '/v2/repository/models/m1/load'],
  ])('has no %s %s: each path takes its methods only', (method, path) => {
    expect(matchRequest(method, path)).toBeUndefined();
  });

  it('reads the model id from the V2 path, percent-decoded', () => {
    expect(parseRequest('POST', '/v2/models/m1/infer', {})).toEqual({ form: 'v2', model: 'm1' });
    expect(parseRequest('GET', '/v2/models/m%3A1', {})).toEqual({ form: 'v2', model: 'm:1' });
    expect(codeOf(() => parseRequest('POST', '/v2/models/a%2Fb/infer', {}))).toBe('invalid_model_id');
    expect(codeOf(() => parseRequest('POST', '/v2/models/%E0%A4%A/infer', {}))).toBe('invalid_model_id');
  });

  it('names version v of model id as the model id@v, in every V2 path that takes a version', () => {
    expect(parseRequest('POST', '/v2/models/wine-7/versions/2/infer', {})).toEqual({ form: 'v2', model: 'wine-7@2' });
    expect(parseRequest('GET', '/v2/models/wine-7/versions/2', {})).toEqual({ form: 'v2', model: 'wine-7@2' });
    expect(parseRequest('HEAD', '/v2/models/wine-7/versions/002/ready', {})).toEqual({ form: 'v2', model: 'wine-7@002' });
    expect(parseRequest('GET', '/v2/models/m%3A1/versions/3', {})).toEqual({ form: 'v2', model: 'm:1@3' });
    // The same model written as one id: the router and replica see one model either way.
    expect(parseRequest('POST', '/v2/models/wine-7@2/infer', {})).toEqual({ form: 'v2', model: 'wine-7@2' });
    expect(parseRequest('POST', '/v2/models/wine-7%402/infer', {})).toEqual({ form: 'v2', model: 'wine-7@2' });
    expect(parseRequest('POST', '/v2/repository/models/wine-7@2/load', {})).toEqual({ form: 'v2', model: 'wine-7@2', repository: 'load' });
  });

  it.each([
    ['POST', '/v2/models/m1/versions/latest/infer'],
    ['GET', '/v2/models/m1/versions/-1'],
    ['GET', '/v2/models/m1/versions/1.5/ready'],
    ['GET', '/v2/models/m1/versions/%31'],
    ['POST', `/v2/models/m1/versions/${'1'.repeat(19)}/infer`],
    ['POST', '/v2/models/m1@1/versions/2/infer'],
    ['POST', '/v2/models/m1@x/infer'],
    ['POST', '/v2/models/@1/infer'],
    ['POST', '/v2/models/m1@/infer'],
    ['POST', '/v2/models/m1@1@2/infer'],
  ])('refuses %s %s with invalid_model_id: a version is digits, named once', (method, path) => {
    expect(matchRequest(method, path)?.form).toBe('v2');
    expect(codeOf(() => parseRequest(method, path, {}))).toBe('invalid_model_id');
  });

  it('reads id@v from the Ray and SageMaker headers', () => {
    expect(parseRequest('POST', '/', { serve_multiplexed_model_id: 'wine-7@1' })).toEqual({ form: 'ray', model: 'wine-7@1' });
    expect(parseRequest('POST', '/invocations', { 'x-amzn-sagemaker-target-model': 'wine-7@2' })).toEqual({ form: 'sagemaker', model: 'wine-7@2' });
    expect(codeOf(() => parseRequest('POST', '/', { serve_multiplexed_model_id: 'wine-7@beta' }))).toBe('invalid_model_id');
  });

  it('reads the Ray form from either spelling of its header, and only from those', () => {
    expect(parseRequest('POST', '/', { serve_multiplexed_model_id: 'a' })).toEqual({ form: 'ray', model: 'a' });
    expect(parseRequest('POST', '/', { 'serve-multiplexed-model-id': 'b' })).toEqual({ form: 'ray', model: 'b' });
    expect(parseRequest('POST', '/', { serve_multiplexed_model_id: 'a', 'serve-multiplexed-model-id': 'a' })).toEqual({ form: 'ray', model: 'a' });
    expect(codeOf(() => parseRequest('POST', '/', sagemaker))).toBe('missing_model_id');
  });

  it('reads the SageMaker form from its header only', () => {
    expect(parseRequest('POST', '/invocations', sagemaker)).toEqual({ form: 'sagemaker', model: 'm1' });
    expect(codeOf(() => parseRequest('POST', '/invocations', ray))).toBe('missing_model_id');
  });

  it('refuses two different model ids, in two spellings or one header given twice', () => {
    expect(codeOf(() => parseRequest('POST', '/', { serve_multiplexed_model_id: 'a', 'serve-multiplexed-model-id': 'b' }))).toBe('invalid_model_id');
    // node:http's req.headers joins a repeated field with ", "; the router's header scan does too.
    expect(codeOf(() => parseRequest('POST', '/', { serve_multiplexed_model_id: 'a, b' }))).toBe('invalid_model_id');
    expect(codeOf(() => parseRequest('POST', '/invocations', { 'x-amzn-sagemaker-target-model': ['a', 'a'] }))).toBe('invalid_model_id');
  });

  it('refuses an empty or malformed header id with invalid_model_id', () => {
    expect(codeOf(() => parseRequest('POST', '/', { serve_multiplexed_model_id: '' }))).toBe('invalid_model_id');
    expect(codeOf(() => parseRequest('POST', '/', { serve_multiplexed_model_id: '../etc' }))).toBe('invalid_model_id');
  });

  it('reads the model of a repository load or unload from its path', () => {
    expect(parseRequest('POST', '/v2/repository/models/m%3A1/load', {})).toEqual({ form: 'v2', model: 'm:1', repository: 'load' });
    expect(parseRequest('POST', '/v2/repository/models/m1/unload', {})).toEqual({ form: 'v2', model: 'm1', repository: 'unload' });
    expect(codeOf(() => parseRequest('POST', '/v2/repository/models/..%2Fx/load', {}))).toBe('invalid_model_id');
  });

  it('gives the other form no model', () => {
    expect(parseRequest('GET', '/v2/health/ready', ray)).toEqual({ form: 'other', model: undefined });
  });
});

describe('a model header named in Connection', () => {
  const named: [string, HeaderBag][] = [
    ...MODEL_HEADERS.map((h): [string, HeaderBag] => [h, { connection: h }]),
    ['in a list, in capitals, with spaces', { connection: 'keep-alive ,  Serve_Multiplexed_Model_Id' }],
    ['in a second Connection field', { connection: ['keep-alive', 'serve-multiplexed-model-id'] }],
    ['as node:http joins two fields', { connection: 'keep-alive, x-amzn-sagemaker-target-model' }],
  ];

  it.each(named)('is found: %s', (_case, headers) => {
    expect(modelHeaderInConnection(headers)).toBeDefined();
  });

  it.each([
    ['POST', '/'],
    ['POST', '/invocations'],
    ['POST', '/v2/models/m1/infer'],
    ['GET', '/v2/health/ready'],
  ])('refuses %s %s with model_header_in_connection, whatever the form', (method, path) => {
    for (const [, headers] of named) expect(codeOf(() => parseRequest(method, path, { ...ray, ...sagemaker, ...headers }))).toBe('model_header_in_connection');
  });

  it('leaves Connection that names other headers alone', () => {
    for (const connection of ['keep-alive', 'close', 'Keep-Alive, x-trace', 'upgrade', 'serve_multiplexed_model_id_x']) {
      expect(parseRequest('POST', '/', { ...ray, connection })).toEqual({ form: 'ray', model: 'm1' });
    }
  });
});
