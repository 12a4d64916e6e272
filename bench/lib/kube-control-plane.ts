import { execFile } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { freePorts } from '../../cli/local-processes.js';
import { etcdArgs } from '../../harness/control-plane.js';
import { startChild, type Child } from './child.js';

const run = promisify(execFile);

/**
 * etcd and kube-apiserver alone, on loopback, for benchmarks that measure what clients cost the
 * control plane (bench:tables). The binaries are the test control plane's
 * (test/tools/build-control-plane.sh builds them once into ~/.cache/modelmux); no controller
 * manager or scheduler: the benchmark's pods are never scheduled, their status is written by
 * the benchmark. One static admin token, a serving certificate the API server makes itself
 * (clients skip verification: loopback only), and ServiceAccount admission off since no
 * controller makes service accounts. Lighter than harness/control-plane.ts, whose etcd flags it shares.
 */
export interface BenchControlPlane {
  /** https://127.0.0.1:<port> */
  server: string;
  /** A kubeconfig for the admin token, pointing at `server` (or at `via`, e.g. a counting relay). */
  kubeconfig(via?: string): Promise<string>;
  /** GET on the API server with the admin token; the body as text. */
  get(path: string): Promise<string>;
  /** A request with a JSON body (POST, or PATCH with a patch content type); rejects unless 2xx. */
  send(method: string, path: string, body: unknown, contentType?: string): Promise<string>;
  /** The API server's and etcd's Prometheus metrics, as text (read with prom-text.ts). */
  apiMetrics(): Promise<string>;
  etcdMetrics(): Promise<string>;
  apiServerPid: number;
  etcdPid: number;
  stop(): Promise<void>;
}

async function assetsDir(): Promise<string> {
  const fromEnv = process.env['KUBEBUILDER_ASSETS'];
  if (fromEnv) return fromEnv;
  const { stdout } = await run('bash', ['test/tools/build-control-plane.sh'], { maxBuffer: 16 * 1024 * 1024 });
  const dir = stdout.trim().split('\n').pop();
  if (!dir) throw new Error('test/tools/build-control-plane.sh printed nothing');
  return dir;
}

function https(method: string, url: string, token: string, body?: { text: string; type: string }): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, ...(body ? { 'content-type': body.type } : {}) };
    const req = request(url, { method, headers, rejectUnauthorized: false, timeout: 10_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${url}: timed out`)));
    req.on('error', reject);
    req.end(body?.text);
  });
}

export async function startBenchControlPlane(): Promise<BenchControlPlane> {
  const bin = await assetsDir();
  const dir = await mkdtemp(join(tmpdir(), 'modelmux-bench-cp-'));
  const children: Child[] = [];
  const stop = async (): Promise<void> => {
    for (const c of children.reverse()) await c.stop(5000);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const [etcdPort, peerPort, apiPort] = (await freePorts(3)) as [number, number, number];
    const token = randomBytes(24).toString('hex');
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1', privateKeyEncoding: { type: 'sec1', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } });
    await writeFile(join(dir, 'sa.key'), privateKey, { mode: 0o600 });
    await writeFile(join(dir, 'tokens.csv'), `${token},admin,admin,"system:masters"\n`, { mode: 0o600 });
    const etcd = await startChild(join(bin, 'etcd'), etcdArgs(join(dir, 'etcd'), etcdPort, peerPort), { readyTimeoutMs: 0 });
    children.push(etcd);
    const server = `https://127.0.0.1:${apiPort}`;
    const api = await startChild(
      join(bin, 'kube-apiserver'),
      [
        '--advertise-address=127.0.0.1',
        '--bind-address=127.0.0.1',
        `--secure-port=${apiPort}`,
        `--etcd-servers=http://127.0.0.1:${etcdPort}`,
        `--cert-dir=${join(dir, 'certs')}`,
        `--token-auth-file=${join(dir, 'tokens.csv')}`,
        '--authorization-mode=RBAC',
        '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
        `--service-account-key-file=${join(dir, 'sa.key')}`,
        `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
        '--service-cluster-ip-range=10.0.0.0/24',
        '--disable-admission-plugins=ServiceAccount',
        '--endpoint-reconciler-type=none',
      ],
      { readyTimeoutMs: 0 },
    );
    children.push(api);
    const deadline = Date.now() + 120_000;
    for (;;) {
      const ok = await https('GET', `${server}/readyz`, token).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) break;
      if (Date.now() > deadline) throw new Error(`kube-apiserver not ready after 120 s:\n${api.output().slice(-4000)}`);
      await sleep(200);
    }
    const call = async (method: string, path: string, body?: { text: string; type: string }): Promise<string> => {
      const r = await https(method, `${server}${path}`, token, body);
      if (r.status < 200 || r.status > 299) throw new Error(`${method} ${path}: ${r.status} ${r.body.slice(0, 300)}`);
      return r.body;
    };
    let configs = 0;
    return {
      server,
      kubeconfig: async (via = server) => {
        const path = join(dir, `kubeconfig-${++configs}.json`);
        const config = {
          apiVersion: 'v1',
          kind: 'Config',
          clusters: [{ name: 'bench', cluster: { server: via, 'insecure-skip-tls-verify': true } }],
          users: [{ name: 'bench', user: { token } }],
          contexts: [{ name: 'bench', context: { cluster: 'bench', user: 'bench', namespace: 'default' } }],
          'current-context': 'bench',
        };
        await writeFile(path, JSON.stringify(config), { mode: 0o600 });
        return path;
      },
      get: (path) => call('GET', path),
      send: (method, path, body, type = 'application/json') => call(method, path, { text: JSON.stringify(body), type }),
      apiMetrics: () => call('GET', '/metrics'),
      etcdMetrics: async () => (await fetch(`http://127.0.0.1:${etcdPort}/metrics`)).text(),
      apiServerPid: api.pid,
      etcdPid: etcd.pid,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
