import { describe, expect, it } from '@jest/globals';
import { runtimeError } from '../../../router/sagemaker/runtime-errors.js';
import { runtimeHeaderProblem, runtimeTarget } from '../../../router/sagemaker/runtime-path.js';

const body = (error: string, message = 'why'): string => JSON.stringify({ error, message, requestId: 'r1' });

describe('the SageMaker runtime API path: which pool an InvokeEndpoint call is', () => {
  it("takes the endpoint name at the router's root as the pool's route prefix", () => {
    expect(runtimeTarget('POST', '/endpoints/wine/invocations')).toEqual({ kind: 'invoke', url: '/wine/invocations', endpoint: 'wine' });
  });

  it('serves the call under a route prefix when the endpoint name is the prefix', () => {
    expect(runtimeTarget('POST', '/wine/endpoints/wine/invocations?x=1')).toEqual({ kind: 'invoke', url: '/wine/invocations?x=1', endpoint: 'wine' });
  });

  it("refuses an endpoint name that is not the prefix's, and names both ways to call it", () => {
    const t = runtimeTarget('POST', '/wine/endpoints/iris/invocations');
    expect(t).toMatchObject({ kind: 'refused', url: '/wine/invocations' });
    expect(t.kind === 'refused' ? t.error.code : '').toBe('invalid_runtime_request');
    expect(t.kind === 'refused' ? t.error.message : '').toContain('/endpoints/iris/invocations');
  });

  it('refuses an endpoint name SageMaker would not accept', () => {
    expect(runtimeTarget('POST', '/endpoints/-wine/invocations')).toMatchObject({ kind: 'refused' });
    expect(runtimeTarget('POST', `/endpoints/${'a'.repeat(64)}/invocations`)).toMatchObject({ kind: 'refused' });
    expect(runtimeTarget('POST', '/endpoints/wi%2Fne/invocations')).toMatchObject({ kind: 'refused' });
  });

  it('leaves every other request alone', () => {
    for (const [method, url] of [
      ['GET', '/endpoints/wine/invocations'],
      ['POST', '/wine/invocations'],
      ['POST', '/endpoints/wine'],
      ['POST', '/endpoints/wine/invocations/'],
      ['POST', '/a/b/endpoints/wine/invocations'],
    ] as const)
      expect(runtimeTarget(method, url)).toEqual({ kind: 'none' });
  });

  it('bounds the opaque headers as SageMaker does: CustomAttributes 1024 ASCII, InferenceId 1 to 64 printable', () => {
    expect(runtimeHeaderProblem('trace=1', 'id-1')).toBeUndefined();
    expect(runtimeHeaderProblem('x'.repeat(1025), undefined)).toMatch(/Custom-Attributes/);
    expect(runtimeHeaderProblem(undefined, ' leading')).toMatch(/Inference-Id/);
    expect(runtimeHeaderProblem(undefined, 'x'.repeat(65))).toMatch(/Inference-Id/);
  });
});

describe("the SageMaker runtime API's errors: the types boto3 raises", () => {
  it('answers a refused request, an unknown endpoint or a model missing from the store as ValidationError 400', () => {
    for (const code of ['missing_model_id', 'invalid_model_id', 'route_not_found', 'model_not_found', 'invalid_runtime_request']) {
      const e = runtimeError(400, body(code));
      expect({ code, type: e.type, status: e.status }).toEqual({ code, type: 'ValidationError', status: 400 });
      expect(JSON.parse(e.body)).toEqual({ message: `why (${code})` });
    }
  });

  it("answers what the model refused or failed at as ModelError 424, with the model's status and body", () => {
    const original = body('input_mismatch', 'shape [1,3] is not [-1,11]');
    const e = runtimeError(400, original);
    expect({ type: e.type, status: e.status }).toEqual({ type: 'ModelError', status: 424 });
    expect(JSON.parse(e.body)).toEqual({ message: `Received client error (400) from model with message "${original}".`, OriginalStatusCode: 400, OriginalMessage: original });
    expect(JSON.parse(runtimeError(500, 'boom').body)).toMatchObject({ OriginalStatusCode: 500, OriginalMessage: 'boom' });
  });

  it('answers a busy, empty or unreachable pool as ServiceUnavailable 503, and an internal error as InternalFailure 500', () => {
    for (const code of ['pool_saturated', 'no_replicas', 'upstream_unavailable', 'store_unavailable', 'client_connection_limit']) expect(runtimeError(503, body(code)).type).toBe('ServiceUnavailable');
    expect(runtimeError(500, body('internal'))).toMatchObject({ type: 'InternalFailure', status: 500 });
  });
});
