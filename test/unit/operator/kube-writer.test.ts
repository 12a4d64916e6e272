import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { apiErrorMessage, apiStatus } from '../../../common/kube-api-errors.js';
import { apiClients } from '../../../operator/api-clients.js';
import type { ApiVerb } from '../../../operator/api-verb.js';
import { KubeWriter } from '../../../operator/kube-writer.js';
import { buildService } from '../../../operator/resources/service.js';
import { autoscaledResource } from './applied-objects.js';

// The writes as they leave client-node, against a plain HTTP server on port 0 standing in for
// the API server's core group: what KubernetesObjectApi sends for server-side apply, and what
// the request counter sees.

interface Seen {
  method: string;
  url: string;
  contentType: string | undefined;
  body: string;
}

const mxd = autoscaledResource();

const json = (res: http.ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
};

describe('KubeWriter through client-node', () => {
  let server: http.Server;
  let seen: Seen[];
  let verbs: ApiVerb[];
  let writer: KubeWriter;

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        seen.push({ method: req.method ?? '', url: req.url ?? '', contentType: req.headers['content-type'], body });
        const path = (req.url ?? '').split('?')[0];
        if (path === '/api/v1') {
          json(res, 200, { kind: 'APIResourceList', groupVersion: 'v1', resources: [{ name: 'services', singularName: 'service', namespaced: true, kind: 'Service', verbs: ['patch', 'delete'] }] });
        } else if (path === '/api/v1/namespaces/ml/services/wine' && req.method === 'PATCH') {
          const obj = JSON.parse(body) as { metadata: Record<string, unknown> };
          json(res, 200, { ...obj, metadata: { ...obj.metadata, resourceVersion: '7' } });
        } else if (path === '/api/v1/namespaces/ml/services/bad' && req.method === 'PATCH') {
          json(res, 422, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Invalid', code: 422, message: 'Service "bad" is invalid: spec.ports: Required value' });
        } else {
          json(res, 404, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404, message: 'not found' });
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    writer = new KubeWriter(apiClients(kc, (v) => verbs.push(v)));
  });

  beforeEach(() => {
    seen = [];
    verbs = [];
  });

  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('applies server-side: an apply patch of the whole object, as modelmux-operator, forced; discovery once', async () => {
    const service = buildService(mxd);
    const stored = await writer.apply(service);
    expect(stored.metadata?.resourceVersion).toBe('7');
    await writer.apply(buildService(mxd));
    expect(verbs).toEqual(['discovery', 'apply', 'apply']);
    const patch = seen[1];
    expect(patch?.method).toBe('PATCH');
    expect(patch?.contentType).toBe('application/apply-patch+yaml');
    const query = new URL(patch?.url ?? '', 'http://x').searchParams;
    expect([query.get('fieldManager'), query.get('force')]).toEqual(['modelmux-operator', 'true']);
    expect(JSON.parse(patch?.body ?? '')).toEqual(JSON.parse(JSON.stringify(service)));
  });

  it('reports a refused apply by the API server’s own message and status', async () => {
    const bad = { ...buildService(mxd), metadata: { name: 'bad', namespace: 'ml' } };
    const err = await writer.apply(bad).catch((e: unknown) => e);
    expect(apiStatus(err)).toBe(422);
    expect(apiErrorMessage(err)).toBe('422 Service "bad" is invalid: spec.ports: Required value');
  });

  it('takes an object already gone as deleted', async () => {
    await expect(writer.delete({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'gone', namespace: 'ml' } })).resolves.toBeUndefined();
    expect(verbs.filter((v) => v !== 'discovery')).toEqual(['delete']);
  });
});
