import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig, type KubernetesListObject, type V1Pod } from '@kubernetes/client-node';
import { eventually } from '../../../harness/eventually.js';
import { KubeInformer, type ChangeType } from '../../../common/kube-informer.js';
import { createLogger } from '../../../common/log.js';

// The informer the router and the operator share, against a plain HTTP server on port 0 that
// answers watches the way the API server does (one JSON event per line, the stream held open).

const pod = (name: string, resourceVersion: string): V1Pod => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'ml', resourceVersion } });

describe('KubeInformer', () => {
  let server: http.Server;
  let watches: URL[];
  let open: http.ServerResponse[];
  let kc: KubeConfig;
  const lines: string[] = [];
  const log = createLogger({ component: 'test' }, (line) => void lines.push(line));

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (url.pathname === '/api/v1/namespaces/ml/pods' && url.searchParams.get('watch') === 'true') {
        watches.push(url);
        open.push(res);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(`${JSON.stringify({ type: 'ADDED', object: pod('added-by-watch', '8') })}\n`);
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
  });

  beforeEach(() => {
    watches = [];
    open = [];
    lines.length = 0;
  });

  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('starts again after its list fails, is synced once a list succeeds, and reports what the list and the watch bring', async () => {
    let lists = 0;
    let restarts = 0;
    let watchRequests = 0;
    const list = (): Promise<KubernetesListObject<V1Pod>> =>
      ++lists === 1 ? Promise.reject(new Error('connect ECONNREFUSED')) : Promise.resolve({ items: [pod('listed', '5')], metadata: { resourceVersion: '7' } });
    const informer = new KubeInformer<V1Pod>(
      kc,
      { name: 'pods', path: '/api/v1/namespaces/ml/pods', list, labelSelector: 'modelmux.io/deployment' },
      {
        log,
        onWatch: () => watchRequests++,
        onRestart: () => restarts++,
      },
    );
    const seen: [ChangeType, string][] = [];
    informer.onChange((type, obj) => seen.push([type, obj.metadata?.name ?? '']));
    try {
      informer.start();
      await informer.synced;
      expect([lists, restarts]).toEqual([2, 1]);
      expect(lines.some((l) => l.includes('"msg":"watch failed; restarting"') && l.includes('"watch":"pods"') && l.includes('ECONNREFUSED') && l.includes('"retryInMs":250'))).toBe(true);
      expect(informer.get('listed', 'ml')?.metadata?.resourceVersion).toBe('5');
      await eventually(() =>
        expect(seen).toEqual([
          ['add', 'listed'],
          ['add', 'added-by-watch'],
        ]),
      );
      // The watch resumes from the list's resourceVersion, with the selector, asking for bookmarks.
      expect(watches.map((u) => [u.searchParams.get('resourceVersion'), u.searchParams.get('labelSelector'), u.searchParams.get('allowWatchBookmarks')])).toEqual([
        ['7', 'modelmux.io/deployment', 'true'],
      ]);
      expect(watchRequests).toBe(1);
    } finally {
      informer.stop();
      for (const res of open) res.end();
    }
  });
});
