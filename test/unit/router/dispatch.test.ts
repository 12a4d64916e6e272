import { createServer, request, type ClientRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { systemClock, systemRandom } from '../../../common/clock.js';
import { silentLogger } from '../../../common/log.js';
import { AccessLog } from '../../../router/exchange/access-log.js';
import { systemSetTimer } from '../../../router/placement/balancer.js';
import { RouterMetrics } from '../../../router/metrics.js';
import type { ProxyLimits, RouterContext } from '../../../router/exchange/context.js';
import { RequestDispatcher } from '../../../router/exchange/dispatch.js';
import { publicRepositoryAccess } from '../../../router/routes/repository-access.js';
import { RouteTable } from '../../../router/routes/route-table.js';
import { RouterServer } from '../../../router/http1/server.js';
import { eventually } from '../../../harness/eventually.js';

/**
 * A replica stand-in: echoes what it got; `x-stub-delay-ms` delays the answer. `overloaded`
 * refuses every request with 503 overloaded; `hang` reads them and never answers (a stopped process).
 */
interface Stub {
  url: string;
  seen: { url: string; headers: IncomingHttpHeaders; body: string }[];
  server: Server;
}

async function stub(overloaded = false, hang = false): Promise<Stub> {
  const seen: Stub['seen'] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += String(c)));
    req.on('end', () => {
      seen.push({ url: req.url ?? '', headers: req.headers, body });
      if (hang) return;
      if (overloaded) return void res.writeHead(503, { 'x-modelmux-overloaded': '1', 'content-type': 'application/json' }).end('{"error":"overloaded"}');
      const answer = (): void =>
        void res.writeHead(200, { 'content-type': 'application/json', connection: 'keep-alive, x-upstream-hop', 'x-upstream-hop': 'secret', 'x-answer': 'yes' }).end(JSON.stringify({ got: body }));
      const delay = Number(req.headers['x-stub-delay-ms'] ?? '0');
      if (delay > 0) setTimeout(answer, delay);
      else answer();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server };
}

interface Rig {
  url: string;
  routes: RouteTable;
  proxy: RouterContext;
  metrics: RouterMetrics;
  lines: () => Record<string, unknown>[];
  close(): Promise<void>;
}

const LIMITS: ProxyLimits = {
  maxBodyBytes: 1024,
  requestTimeoutMs: 2000,
  tryTimeoutMs: 300,
  tryTimeoutFloorMs: 100,
  tryTimeoutMultiple: 5,
  maxRetries: 2,
  bodyIdleTimeoutMs: 2000,
  bodyTimeoutMs: 2000,
  maxBufferedBytes: 512,
  maxResponseBufferBytes: 1024,
  slowReaderTimeoutMs: 1000,
};

/** `routed`: the replicas in the route at first (default all); every stub is closed with the rig. */
async function rig(replicas: Stub[], fastPath: boolean, limits: Partial<ProxyLimits> = {}, routed: Stub[] = replicas): Promise<Rig> {
  const routes = new RouteTable({ recentMs: 5000, tableLagMs: 2000, maxQueue: 8, connectionsPerReplica: 4 }, systemClock, systemRandom, systemSetTimer, silentLogger);
  routes.apply([{ prefix: '/wine', maxOngoingRequests: 4, matchTimeoutMs: 1000, replicas: routed.map((s) => ({ name: s.url, url: s.url, table: undefined })) }]);
  const written: string[] = [];
  const access = new AccessLog({ component: 'router' }, (line) => void written.push(line));
  const metrics = new RouterMetrics();
  const dispatcher = new RequestDispatcher(routes, { ...LIMITS, ...limits }, metrics, silentLogger, systemClock, access);
  const server = new RouterServer(dispatcher, publicRepositoryAccess(undefined, 8002), routes, metrics, silentLogger, {
    fastPath,
    headersTimeoutMs: 2000,
    keepAliveTimeoutMs: 2000,
    bodyIdleTimeoutMs: 2000,
    bodyTimeoutMs: 2000,
    writeTimeoutMs: 2000,
    maxConnections: 100,
    maxConnectionsPerClient: 100,
  });
  const address = await server.listen(0, '127.0.0.1');
  return {
    url: `http://127.0.0.1:${address.port}`,
    routes,
    proxy: dispatcher.context,
    metrics,
    lines: () => {
      return written.map((l) => JSON.parse(l) as Record<string, unknown>);
    },
    close: async () => {
      await server.drain(1000);
      for (const s of replicas) s.server.closeAllConnections();
      await routes.close();
      await Promise.all(replicas.map((s) => new Promise<void>((r) => s.server.close(() => r()))));
    },
  };
}

const inFlight = (r: Rig): number => (r.routes.match('/wine')?.balancer.replicaNames() ?? []).reduce((n, name) => n + (r.routes.match('/wine')?.balancer.inFlight(name) ?? 0), 0);

/** A client that sends a request (`send`) and goes away once `arrived` holds: the router has what it sent. */
async function abandon(url: string, headers: Record<string, string>, send: (req: ClientRequest) => void, arrived: () => void): Promise<void> {
  const req = request(url, { method: 'POST', headers });
  req.on('error', () => undefined);
  send(req);
  try {
    await eventually(arrived, 5000, 5);
  } finally {
    req.destroy();
  }
}

// Every case runs on both readers of client requests: the fast path and node:http.
describe.each([
  ['fast path', true],
  ['node:http only', false],
])('the router’s dispatch and exchange, %s', (_reader, fastPath) => {
  it('forwards a request below its prefix without hop-by-hop headers and streams the answer back with the request id', async () => {
    const s = await stub();
    const r = await rig([s], fastPath);
    try {
      const res = await fetch(`${r.url}/wine/?q=1`, {
        method: 'POST',
        headers: { serve_multiplexed_model_id: 'm1', 'x-request-id': 'trace-1', te: 'trailers', 'x-forwarded-for': '10.0.0.9' },
        body: '{"rows":[1]}',
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-request-id')).toBe('trace-1');
      expect(res.headers.get('x-answer')).toBe('yes');
      expect(res.headers.get('x-upstream-hop')).toBeNull();
      expect(await res.json()).toEqual({ got: '{"rows":[1]}' });
      const got = s.seen[0];
      expect(got?.url).toBe('/?q=1');
      expect(got?.headers).toMatchObject({ serve_multiplexed_model_id: 'm1', 'x-request-id': 'trace-1', 'x-forwarded-for': '10.0.0.9, 127.0.0.1', 'content-length': '12' });
      expect(got?.headers['te']).toBeUndefined();
      expect(r.lines()).toEqual([
        expect.objectContaining({ msg: 'request', requestId: 'trace-1', route: '/wine', model: 'm1', form: 'ray', replica: s.url, placement: 'cold', tries: 1, status: 200 }),
      ]);
      expect(inFlight(r)).toBe(0);
    } finally {
      await r.close();
    }
  });

  it('ends a try that gets no response headers within the try timeout with 504 timeout, and frees its slot', async () => {
    const s = await stub();
    const r = await rig([s], fastPath);
    try {
      const t0 = Date.now();
      const res = await fetch(`${r.url}/wine/v2/models/m1/infer`, { method: 'POST', headers: { 'x-stub-delay-ms': '1500' }, body: '{}' });
      const elapsed = Date.now() - t0;
      expect(res.status).toBe(504);
      expect(((await res.json()) as { error: string }).error).toBe('timeout');
      // The try timeout is 300 ms, the request's 2000 ms; the sweep runs every 15 ms.
      expect(elapsed).toBeGreaterThanOrEqual(290);
      expect(elapsed).toBeLessThan(1000);
      expect(inFlight(r)).toBe(0);
      expect(r.lines()).toEqual([expect.objectContaining({ error: 'timeout', status: 504 })]);
      expect(r.metrics.timeouts.labels({ phase: 'upstream' }).value).toBe(1);
      expect(r.metrics.timeouts.labels({ phase: 'request' }).value).toBe(0);
    } finally {
      await r.close();
    }
  });

  it('retries a request once on another replica when the first says it is overloaded', async () => {
    const busy = await stub(true);
    const free = await stub();
    const r = await rig([busy, free], fastPath);
    try {
      // Placement hashes model ids over replica names (random ports): keep asking for new models
      // until one has been placed on the busy replica, so the retry is always exercised.
      for (let i = 0; i < 6 || (busy.seen.length === 0 && i < 40); i++) {
        const res = await fetch(`${r.url}/wine/v2/models/m${i}/infer`, { method: 'POST', body: '{}' });
        expect(res.status).toBe(200);
      }
      expect(busy.seen.length).toBeGreaterThan(0);
      const retried = r.lines().filter((l) => l['tries'] === 2);
      expect(retried).toHaveLength(busy.seen.length);
      expect(retried.every((l) => l['replica'] === free.url)).toBe(true);
      expect(inFlight(r)).toBe(0);
    } finally {
      await r.close();
    }
  });

  it('gives back the slot of a request whose client goes away', async () => {
    const s = await stub();
    const r = await rig([s], fastPath);
    try {
      await abandon(
        `${r.url}/wine/v2/models/m1/infer`,
        { 'x-stub-delay-ms': '250' },
        (req) => req.end('{}'),
        () => expect(s.seen).toHaveLength(1),
      );
      await eventually(
        () => {
          expect(inFlight(r)).toBe(0);
          expect(r.lines()).toHaveLength(1);
        },
        5000,
        5,
      );
      expect(r.lines()).toEqual([expect.objectContaining({ error: 'client_closed', status: 499 })]);
    } finally {
      await r.close();
    }
  });

  it('refuses a body the router has no room for with 503 buffer_full, Retry-After and a closed connection, and gives the room back', async () => {
    const s = await stub();
    const r = await rig([s], fastPath);
    try {
      // 600 bytes fit the body limit (1024) but not what the router may hold at once (512).
      const res = await fetch(`${r.url}/wine/v2/models/m1/infer`, { method: 'POST', body: 'x'.repeat(600) });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(res.headers.get('connection')).toBe('close');
      expect(await res.json()).toMatchObject({ error: 'buffer_full' });
      expect(s.seen).toHaveLength(0);
      // A body of unknown length is refused once what came of it does not fit.
      const chunked = await fetch(`${r.url}/wine/v2/models/m1/infer`, { method: 'POST', body: new Blob(['x'.repeat(600)]).stream(), duplex: 'half' });
      expect(chunked.status).toBe(503);
      expect(await chunked.json()).toMatchObject({ error: 'buffer_full' });
      // Bodies that fit are served, one after the other, each giving its room back.
      for (let i = 0; i < 3; i++) expect((await fetch(`${r.url}/wine/v2/models/m1/infer`, { method: 'POST', body: 'y'.repeat(400) })).status).toBe(200);
      expect(r.proxy.buffered.used).toBe(0);
      expect(r.metrics.rejectedConnections.labels({ reason: 'buffered_bytes' }).value).toBe(2);
    } finally {
      await r.close();
    }
  });

  it('survives a client that goes away halfway through its body, and keeps answering', async () => {
    const s = await stub();
    const r = await rig([s], fastPath);
    try {
      await abandon(
        `${r.url}/wine/v2/models/m1/infer`,
        { 'content-length': '100' },
        (req) => req.write('{"half":'),
        () => expect(r.proxy.buffered.used).toBeGreaterThan(0),
      );
      await eventually(() => expect(r.lines()).toHaveLength(1), 5000, 5);
      expect((await fetch(`${r.url}/wine/v2/models/m1/infer`, { method: 'POST', body: '{}' })).status).toBe(200);
      expect(s.seen).toHaveLength(1);
      expect(r.lines().map((l) => l['status'])).toEqual([499, 200]);
    } finally {
      await r.close();
    }
  });
});

/** The route's replicas from now on: what discovery would apply. */
function setReplicas(r: Rig, replicas: readonly Stub[]): void {
  r.routes.apply([{ prefix: '/wine', maxOngoingRequests: 4, matchTimeoutMs: 1000, replicas: replicas.map((s) => ({ name: s.url, url: s.url, table: undefined })) }]);
}

/** Sends `n` requests without a model id from `clients` clients; resolves with each one's status and time. */
async function sendMany(r: Rig, n: number, clients = 4): Promise<{ status: number; ms: number }[]> {
  const out: { status: number; ms: number }[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < n) {
        next++;
        const t0 = Date.now();
        const res = await fetch(`${r.url}/wine/v2/health/ready`);
        await res.arrayBuffer();
        out.push({ status: res.status, ms: Date.now() - t0 });
      }
    }),
  );
  return out;
}

// ADR 0030: a try that outlives its adaptive timeout, or whose replica is marked down, is retried
// elsewhere; one that may not be retried keeps the flat cap. The cap here is 5 s and the
// adaptive timeout max(100 ms, 5 × p99): a slow machine stretches the p99, not the verdicts.
describe('the exchange’s retries', () => {
  const CAP = 5000;

  it('gives up a try at a replica that stops answering after the adaptive timeout, answers from another, and ejects the silent one', async () => {
    const healthy = await stub();
    const silent = await stub(false, true);
    const r = await rig([healthy, silent], true, { tryTimeoutMs: CAP, requestTimeoutMs: 20_000 }, [healthy]);
    try {
      // What the route learns its latency from: answers of the healthy replica.
      expect((await sendMany(r, 40)).every((x) => x.status === 200)).toBe(true);
      setReplicas(r, [healthy, silent]);
      const answers = await sendMany(r, 40, 8);
      expect(answers.map((x) => x.status)).toEqual(Array(40).fill(200));
      expect(silent.seen.length).toBeGreaterThan(0);
      // Every request that met the silent replica was answered long before the cap.
      expect(Math.max(...answers.map((x) => x.ms))).toBeLessThan(CAP);
      const retried = (reason: string): number => r.metrics.retries.labels({ route: '/wine', reason }).value;
      // Each try there was given up: by its own timeout, or because the replica was ejected meanwhile.
      expect(retried('timeout')).toBeGreaterThan(0);
      // (A try given up before the replica had read it whole is retried too, unseen there.)
      const givenUp = retried('timeout') + retried('replica_down');
      expect(givenUp).toBeGreaterThanOrEqual(silent.seen.length);
      // The third timeout in a row ejects it (for 2 s, longer than the test): no tries go there after.
      expect(r.metrics.ejections.labels({ route: '/wine', outcome: 'failed' }).value).toBe(retried('timeout') >= 3 ? 1 : 0);
      expect(r.metrics.tryTimeout.labels({ route: '/wine' }).count).toBe(80 + givenUp);
      expect(inFlight(r)).toBe(0);
    } finally {
      await r.close();
    }
  });

  it('keeps a slow request at a replica that answers other requests meanwhile: nothing is retried or ejected', async () => {
    const a = await stub();
    const b = await stub();
    const r = await rig([a, b], true, { tryTimeoutMs: CAP, requestTimeoutMs: 20_000 });
    try {
      expect((await sendMany(r, 40)).every((x) => x.status === 200)).toBe(true);
      // One request that is slow by itself (1.5 s, far past the ~100 ms adaptive timeout), among
      // fast ones that both replicas keep answering.
      const slow = fetch(`${r.url}/wine/v2/health/ready`, { headers: { 'x-stub-delay-ms': '1500', 'x-request-id': 'slow-one' } });
      let running = true;
      // Enough clients, each answered after 20 ms, that both replicas hold some at any time
      // (least-request placement sends the next one to the less loaded), so the slow one's
      // replica answers others while it waits.
      const fast = Promise.all(
        Array.from({ length: 8 }, async () => {
          while (running) await (await fetch(`${r.url}/wine/v2/health/ready`, { headers: { 'x-stub-delay-ms': '20' } })).arrayBuffer();
        }),
      );
      const res = await slow;
      running = false;
      await fast;
      expect(res.status).toBe(200);
      const line = r.lines().find((l) => l['requestId'] === 'slow-one');
      expect(line).toMatchObject({ status: 200, tries: 1 });
      // It was tried once: at the replica it went to first, which answered the others meanwhile.
      expect([...a.seen, ...b.seen].filter((s) => s.headers['x-request-id'] === 'slow-one')).toHaveLength(1);
      expect(r.metrics.retries.labels({ route: '/wine', reason: 'timeout' }).value).toBe(0);
      // At least the slow one was kept; on a loaded machine a 20 ms request can outlast the adaptive
      // timeout too, and is kept the same way (none was retried: above).
      expect(r.metrics.slowTriesKept.labels({ route: '/wine' }).value).toBeGreaterThanOrEqual(1);
      expect(r.metrics.ejections.labels({ route: '/wine', outcome: 'failed' }).value).toBe(0);
    } finally {
      await r.close();
    }
  });

  it('retries the tries waiting at a replica that leaves the route on one that stays', async () => {
    const stays = await stub();
    const leaves = await stub(false, true);
    const r = await rig([stays, leaves], true, { tryTimeoutMs: CAP, requestTimeoutMs: 20_000 });
    try {
      // Models the router has never seen go out cold, with the cap as their try timeout.
      const sent = Array.from({ length: 12 }, (_, i) => fetch(`${r.url}/wine/v2/models/cold${i}/infer`, { method: 'POST', body: '{}' }));
      await eventually(() => expect(leaves.seen.length).toBeGreaterThan(0), 3000, 10);
      const t0 = Date.now();
      setReplicas(r, [stays]);
      const answers = await Promise.all(sent);
      expect(answers.map((a) => a.status)).toEqual(Array(12).fill(200));
      expect(Date.now() - t0).toBeLessThan(CAP);
      // Every try the router had sent there was retried: at least those the replica had read in
      // whole (a try cancelled mid-send is retried too, unseen), each one request's second try.
      const retried = r.metrics.retries.labels({ route: '/wine', reason: 'replica_down' }).value;
      expect(retried).toBeGreaterThanOrEqual(leaves.seen.length);
      const secondTries = r.lines().filter((l) => l['tries'] === 2);
      expect(secondTries.length).toBe(retried);
      expect(secondTries.every((l) => l['replica'] === stays.url)).toBe(true);
      expect(inFlight(r)).toBe(0);
    } finally {
      await r.close();
    }
  });

  it('lets a try that cannot go elsewhere wait up to the cap', async () => {
    const healthy = await stub();
    const silent = await stub(false, true);
    const r = await rig([healthy, silent], true, { tryTimeoutMs: 1500, requestTimeoutMs: 20_000 }, [healthy]);
    try {
      expect((await sendMany(r, 40)).every((x) => x.status === 200)).toBe(true);
      setReplicas(r, [silent]);
      const t0 = Date.now();
      const res = await fetch(`${r.url}/wine/v2/health/ready`);
      expect(res.status).toBe(504);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(1450);
      expect(r.metrics.timeouts.labels({ phase: 'upstream' }).value).toBe(1);
    } finally {
      await r.close();
    }
  });

  it('keeps to the per-request retry limit: with none allowed, an overloaded answer goes back to the client', async () => {
    const busy = await stub(true);
    const r = await rig([busy, await stub(true)], true, { maxRetries: 0 });
    try {
      const res = await fetch(`${r.url}/wine/v2/models/m1/infer`, { method: 'POST', body: '{}' });
      expect(res.status).toBe(503);
      expect(r.lines()).toEqual([expect.objectContaining({ tries: 1, status: 503 })]);
    } finally {
      await r.close();
    }
  });
});
