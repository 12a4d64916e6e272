import { apiVerb } from '../../../operator/api-verb.js';

const verb = (method: string, path: string): string => apiVerb(method, new URL(path, 'https://127.0.0.1:6443'));

describe('apiVerb', () => {
  it('tells a get from a list, in a namespace, across namespaces and for a custom kind', () => {
    expect(verb('GET', '/apis/apps/v1/namespaces/ml/deployments/wine')).toBe('get');
    expect(verb('GET', '/apis/apps/v1/namespaces/ml/deployments')).toBe('list');
    expect(verb('GET', '/apis/apps/v1/deployments?labelSelector=a%3Db')).toBe('list');
    expect(verb('GET', '/api/v1/namespaces/ml/pods')).toBe('list');
    expect(verb('GET', '/api/v1/namespaces/ml/pods/wine-0')).toBe('get');
    expect(verb('GET', '/apis/modelmux.io/v1alpha1/multiplexeddeployments')).toBe('list');
  });

  it('treats namespaces themselves as a kind', () => {
    expect(verb('GET', '/api/v1/namespaces')).toBe('list');
    expect(verb('GET', '/api/v1/namespaces/ml')).toBe('get');
  });

  it('counts a subresource read as a get and ?watch=true as a watch', () => {
    expect(verb('GET', '/apis/modelmux.io/v1alpha1/namespaces/ml/multiplexeddeployments/wine/status')).toBe('get');
    expect(verb('GET', '/api/v1/pods?watch=true&resourceVersion=7')).toBe('watch');
  });

  it('calls what maps a kind to its path discovery', () => {
    expect(verb('GET', '/apis/apps/v1')).toBe('discovery');
    expect(verb('GET', '/api/v1')).toBe('discovery');
    expect(verb('GET', '/apis')).toBe('discovery');
  });

  it('names writes by method', () => {
    expect(verb('PATCH', '/apis/apps/v1/namespaces/ml/deployments/wine?fieldManager=x&force=true')).toBe('patch');
    expect(verb('POST', '/api/v1/namespaces/ml/events')).toBe('create');
    expect(verb('PUT', '/apis/coordination.k8s.io/v1/namespaces/ml/leases/l')).toBe('update');
    expect(verb('DELETE', '/apis/autoscaling/v2/namespaces/ml/horizontalpodautoscalers/wine')).toBe('delete');
    expect(verb('OPTIONS', '/api/v1/pods')).toBe('other');
  });
});
