import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { HEADER_RAY_MODEL_ID, HEADER_SAGEMAKER_MODEL } from '../../common/names.js';
import { credentials } from '@grpc/grpc-js';
import { inferenceClient } from '../../common/grpc/inference-service.js';
import { SAMPLE_WINE, WINE_FEATURES, WINE_INPUT, wineForward, wineWeights } from '../../common/wine-model.js';
import { eventually } from '../../harness/eventually.js';

const run = promisify(execFile);
const MAIN = join(process.cwd(), 'dist/cli/main.js');
const START_TIMEOUT_MS = 180_000;

/** Splits a POSIX shell command line made of plain words and single-quoted strings. */
function shellWords(line: string): string[] {
  const words: string[] = [];
  let current = '';
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i] ?? '';
    if (ch === "'") {
      const end = line.indexOf("'", i + 1);
      if (end === -1) throw new Error(`unterminated quote in: ${line}`);
      current += line.slice(i + 1, end);
      inWord = true;
      i = end;
    } else if (ch === '\\') {
      current += line[++i] ?? '';
      inWord = true;
    } else if (ch === ' ') {
      if (inWord) words.push(current);
      current = '';
      inWord = false;
    } else {
      current += ch;
      inWord = true;
    }
  }
  if (inWord) words.push(current);
  return words;
}

interface CurlRequest {
  url: string;
  headers: Record<string, string>;
  body: string | undefined;
}

/** What curl would send for the options the banner uses (-sS, -H, -d). */
function curlToRequest(line: string): CurlRequest {
  const [cmd, ...args] = shellWords(line.trim());
  expect(cmd).toBe('curl');
  const req: CurlRequest = { url: '', headers: {}, body: undefined };
  for (let i = 0; i < args.length; i++) {
    const a = args[i] ?? '';
    if (a === '-H') {
      const h = args[++i] ?? '';
      const colon = h.indexOf(':');
      req.headers[h.slice(0, colon).trim()] = h.slice(colon + 1).trim();
    } else if (a === '-d') req.body = args[++i];
    else if (a === '-sS') continue;
    else if (a.startsWith('-')) throw new Error(`the test does not know curl option ${a}`);
    else req.url = a;
  }
  return req;
}

function modelIdOf(req: CurlRequest): string {
  const fromPath = /\/v2\/models\/([^/]+)\/infer$/.exec(req.url)?.[1];
  const byHeader = Object.entries(req.headers).find(([k]) => [HEADER_RAY_MODEL_ID, HEADER_SAGEMAKER_MODEL].includes(k.toLowerCase()))?.[1];
  const id = fromPath ?? byHeader;
  if (!id) throw new Error(`no model id in ${JSON.stringify(req)}`);
  return id;
}

/** The one prediction of a V2 or rows answer. */
function predictionOf(body: unknown): number | undefined {
  const b = body as { outputs?: { data?: number[] }[]; predictions?: number[][] };
  return b.outputs?.[0]?.data?.[0] ?? b.predictions?.[0]?.[0];
}

async function portOpen(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const s = connect(Number(port), hostname);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

describe('modelmux local', () => {
  let dir: string;
  let local: ChildProcess | undefined;
  let stdout = '';
  let stderr = '';
  let exited: Promise<number | null>;
  /** The pool's URL from the banner's `route` line. */
  const routeUrl = (): string => /^\s+route\s+(\S+)$/m.exec(stdout)?.[1] ?? '';

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'modelmux-local-'));
    // --verbose shows every line the children write, so the log level test below can see that
    // --log-level reached them.
    const args = [
      '--port',
      '0',
      '--grpc-port',
      '0',
      '--admin-port',
      '0',
      '--replicas',
      '2',
      '--max-models',
      '2',
      '--example-models',
      '4',
      '--model-source',
      `file://${dir}`,
      '--log-level',
      'warn',
      '--verbose',
    ];
    local = spawn(process.execPath, [MAIN, 'local', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    exited = new Promise((resolve) => local?.once('exit', (code) => resolve(code)));
    local.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    local.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const deadline = Date.now() + START_TIMEOUT_MS - 5000;
    while (!stdout.includes('Press Ctrl-C to stop.')) {
      if (local.exitCode !== null || Date.now() > deadline) throw new Error(`modelmux local did not come up:\n${stdout}\n${stderr}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }, START_TIMEOUT_MS);

  afterAll(async () => {
    if (local && local.exitCode === null) {
      local.kill('SIGKILL');
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  }, 60_000);

  it('writes the example models it was asked for into the file:// store', async () => {
    expect((await readdir(dir)).sort()).toEqual(['wine-0', 'wine-1', 'wine-2', 'wine-3']);
  });

  it('prints curl commands for the three request forms that answer with the reference forward pass', async () => {
    const lines = stdout.split('\n').filter((l) => l.trim().startsWith('curl '));
    const requests = lines.map(curlToRequest);
    expect(requests.map((r) => new URL(r.url).pathname)).toEqual(['/wine/v2/models/wine-0/infer', '/wine/', '/wine/invocations']);
    // Three different models, two of each in turn, on replicas that hold at most two: loads,
    // hits and evictions all happen, and every answer must still be exact.
    for (const round of [0, 1]) {
      for (const req of requests) {
        const res = await fetch(req.url, { method: 'POST', headers: req.headers, ...(req.body !== undefined ? { body: req.body } : {}) });
        const body: unknown = await res.json();
        // The body is in the comparison so a failure shows the error answer.
        expect({ round, url: req.url, status: res.status, body: res.status === 200 ? 'ok' : body }).toEqual({ round, url: req.url, status: 200, body: 'ok' });
        const id = modelIdOf(req);
        const [expected] = wineForward(wineWeights(id), [SAMPLE_WINE]);
        expect(predictionOf(body)).toBeCloseTo(expected ?? NaN, 4);
      }
    }
  }, 120_000);

  it('serves the Open Inference Protocol over gRPC on the printed port, for the model the Triton line names', async () => {
    const grpcAddress = /^\s+grpc\s+(\S+)$/m.exec(stdout)?.[1] ?? '';
    const triton = stdout.split('\n').find((l) => l.trim().startsWith('python3 -c ')) ?? '';
    expect(triton).toContain(`g.InferenceServerClient("${grpcAddress}")`);
    const model = /c\.infer\("([^"]+)"/.exec(triton)?.[1] ?? '';
    const client = new (inferenceClient())(grpcAddress, credentials.createInsecure());
    try {
      const answer = await new Promise<{ outputs: { contents: { fp32_contents: number[] } }[] }>((resolve, reject) =>
        (client as unknown as Record<string, (req: unknown, cb: (err: Error | null, res: never) => void) => void>)['ModelInfer']?.call(
          client,
          { model_name: model, inputs: [{ name: WINE_INPUT, datatype: 'FP32', shape: [1, WINE_FEATURES], contents: { fp32_contents: [...SAMPLE_WINE] } }] },
          (err, res) => (err ? reject(err) : resolve(res)),
        ),
      );
      const [expected] = wineForward(wineWeights(model), [SAMPLE_WINE]);
      expect(answer.outputs[0]?.contents.fp32_contents[0]).toBeCloseTo(expected ?? NaN, 4);
    } finally {
      client.close();
    }
  }, 60_000);

  it('answers an unknown model with the model_not_found code through the printed route', async () => {
    const res = await fetch(`${routeUrl()}/v2/models/no-such-model/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: [{ name: 'features', shape: [1, 11], datatype: 'FP32', data: SAMPLE_WINE }] }),
    });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: 'model_not_found' });
  }, 60_000);

  it('passes --log-level to the replicas and the router: their warnings only, after loads and answers', async () => {
    // A request the router itself refuses: its access line is a warning.
    const origin = new URL(routeUrl()).origin;
    const res = await fetch(`${origin}/no-such-route/v2/models/wine-0/infer`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(404);
    const lines = stderr.split('\n').filter((l) => /^\[(replica-\d|router)\] \{/.test(l));
    // The requests above loaded and evicted models and were answered: at info each would have a line.
    expect(lines.filter((l) => l.includes('"level":"info"'))).toEqual([]);
    // The unknown model's failed load is a replica's warning (relayed by local mode, so perhaps not yet).
    const failedLoad = (l: string): boolean => l.startsWith('[replica-') && l.includes('"event":"load-failed"') && l.includes('no-such-model');
    await eventually(() => expect(stderr.split('\n').some(failedLoad)).toBe(true), 5000, 100);
    await eventually(() => expect(stderr).toMatch(/^\[router\] \{.*"level":"warn".*"path":"\/no-such-route\/v2\/models\/wine-0\/infer"/m), 5000, 100);
  }, 30_000);

  it("prints the router's admin port, which serves its metrics and the repository API that the route refuses", async () => {
    const admin = /^\s+metrics\s+(\S+)\/metrics$/m.exec(stdout)?.[1] ?? '';
    expect(stdout).toContain(`  admin    ${admin} (`);
    expect(await (await fetch(`${admin}/metrics`)).text()).toContain('modelmux_router_requests_total');
    const index = (base: string): Promise<Response> => fetch(`${base}/v2/repository/index`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect((await index(`${admin}/wine`)).status).toBe(200);
    const refused = await index(routeUrl());
    expect([refused.status, ((await refused.json()) as { error?: string }).error]).toEqual([403, 'repository_api_disabled']);
  }, 30_000);

  it('stops the router and every replica on Ctrl-C and exits 0', async () => {
    const routerUrl = routeUrl();
    const replicaUrls = (/^\s+replicas\s+(.+)$/m.exec(stdout)?.[1] ?? '').trim().split(' ');
    const urls = [routerUrl, ...replicaUrls];
    expect(replicaUrls).toHaveLength(2);
    expect(await Promise.all(urls.map(portOpen))).toEqual(urls.map(() => true));
    local?.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(await Promise.all(urls.map(portOpen))).toEqual(urls.map(() => false));
  }, 60_000);
});

describe('modelmux local configuration', () => {
  it('lists every problem at once and exits 2 without starting anything', async () => {
    const err = await run(process.execPath, [MAIN, 'local', '--replicas', '0', '--port', 'eighty', '--model-source', 'ftp://x']).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 2 });
    const stderr = (err as { stderr: string }).stderr;
    for (const flag of ['--replicas', '--port', '--model-source']) expect(stderr).toContain(flag);
  });
});
