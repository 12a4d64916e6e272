import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { SAMPLE_WINE, WINE_FEATURES, WINE_INPUT } from '../../common/wine-model.js';
import { eventually } from '../../harness/eventually.js';
import { startLocal, type LocalProcess } from '../helpers/local-process.js';
import { startS3Server, type S3Server } from '../../harness/s3-server.js';

const run = promisify(execFile);
const MAIN = join(process.cwd(), 'dist/cli/main.js');
/** The router's static discovery reads each replica's table this often (its default). */
const POLL_MS = 500;
const CLIENTS = 4;

const body = JSON.stringify({ inputs: [{ name: WINE_INPUT, shape: [1, WINE_FEATURES], datatype: 'FP32', data: SAMPLE_WINE }] });

interface Sample {
  start: number;
  end: number;
  status: number;
}

async function infer(base: string, id: string): Promise<number> {
  try {
    const res = await fetch(`${base}/v2/models/${id}/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0; // refused or reset: no answer at all
  }
}

/** CLIENTS loops through the router over `ids` until `stop()`, every answer recorded as it comes. */
async function drive(base: string, ids: readonly string[], stop: () => boolean, samples: Sample[]): Promise<void> {
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, c) => {
      for (let i = c; !stop(); i++) {
        const start = performance.now();
        const status = await infer(base, ids[i % ids.length] ?? '');
        samples.push({ start, end: performance.now(), status });
      }
    }),
  );
}

describe('modelmux local keeps its processes running', () => {
  let s3: S3Server;
  let home: string;
  let local: LocalProcess;
  /** The pid of the latest start of `name`, from local's own log. */
  const pidOf = (name: string): number =>
    Number(
      local
        .lines()
        .filter((l) => l['msg'] === `started ${name}`)
        .at(-1)?.['pid'],
    );
  const cacheFiles = async (replica: string): Promise<string[]> => {
    const [pool] = (await readdir(home)).filter((d) => d.startsWith('modelmux-local-'));
    return pool === undefined ? [] : readdir(join(home, pool, replica, 'files')).catch(() => []);
  };

  beforeAll(async () => {
    s3 = await startS3Server();
    // The pool's folders land in TMPDIR: a folder of the test's own shows what is left behind.
    home = await mkdtemp(join(tmpdir(), 'modelmux-supervision-'));
    const env = { ...process.env, ...s3.awsEnv, MODELMUX_S3_ENDPOINT: s3.endpoint, TMPDIR: home };
    await run(process.execPath, [MAIN, 'models', '--out', `s3://${s3.bucket}/pool`, '--count', '4'], { env });
    local = await startLocal(['--port', '0', '--replicas', '3', '--max-models', '3', '--model-source', `s3://${s3.bucket}/pool`], env, 150_000);
  }, 600_000);

  afterAll(async () => {
    if (local?.child.exitCode === null) {
      local.child.kill('SIGKILL');
      await local.exited;
    }
    await rm(home, { recursive: true, force: true });
    await s3?.stop();
  }, 60_000);

  it('restarts a SIGKILLed replica with an empty table and a clean cache folder while the router answers from the others', async () => {
    const urls = local.replicaUrls();
    expect(urls).toHaveLength(3);
    // Every replica holds wine-0 and wine-1, so the router has two others for each.
    for (const url of urls) for (const id of ['wine-0', 'wine-1']) expect(await infer(url, id)).toBe(200);
    await sleep(2 * POLL_MS);
    const victim = urls[1] ?? '';
    const filesBefore = await cacheFiles('replica-1');
    expect(filesBefore.length).toBeGreaterThan(0);
    const pid = pidOf('replica-1');

    let stop = false;
    const samples: Sample[] = [];
    const load = drive(local.route(), ['wine-0', 'wine-1'], () => stop, samples);
    await sleep(1000);
    process.kill(pid, 'SIGKILL');
    const killedAt = performance.now();
    // Once local has seen the exit and started the new process, nothing can answer for the old one.
    await eventually(() => expect(pidOf('replica-1')).not.toBe(pid), 15_000, 20);
    // Its first table, read as soon as it listens again: the router sends it nothing before its
    // next poll, and nothing of these two models while the others hold them.
    const firstTable = await eventually(
      async () => {
        const res = await fetch(`${victim}/models`);
        return { at: performance.now(), table: (await res.json()) as { loaded: string[] } };
      },
      30_000,
      20,
    );
    await sleep(3 * POLL_MS);
    stop = true;
    await load;

    expect(local.lines().find((l) => l['process'] === 'replica-1' && l['signal'] === 'SIGKILL')).toMatchObject({ level: 'warn', restartInMs: 500 });
    expect(firstTable.table.loaded).toEqual([]);
    expect(firstTable.at - killedAt).toBeLessThan(15_000);
    const during = samples.filter((s) => s.end >= killedAt);
    const failed = during.filter((s) => s.status !== 200);
    process.stdout.write(`replica SIGKILL under load: ${failed.length} of ${during.length} requests failed (${JSON.stringify(failed.map((f) => f.status))})\n`);
    // At most the requests in flight on it when it died; the router retries only connection failures.
    expect(failed.length).toBeLessThanOrEqual(CLIENTS);
    const afterPoll = samples.filter((s) => s.start > firstTable.at + POLL_MS);
    expect(afterPoll.length).toBeGreaterThan(0);
    expect(afterPoll.filter((s) => s.status !== 200)).toEqual([]);
    // It serves again, and kept none of the files the killed process had downloaded.
    expect(await infer(victim, 'wine-2')).toBe(200);
    expect((await cacheFiles('replica-1')).filter((f) => filesBefore.includes(f))).toEqual([]);
  }, 120_000);

  it('restarts a SIGKILLed router on the same port', async () => {
    const pid = pidOf('router');
    const readyBefore = local.lines().filter((l) => l['msg'] === 'router is ready again').length;
    process.kill(pid, 'SIGKILL');
    await eventually(() => expect(local.lines().filter((l) => l['msg'] === 'router is ready again')).toHaveLength(readyBefore + 1), 30_000, 50);
    expect(pidOf('router')).not.toBe(pid);
    const statuses = await Promise.all(Array.from({ length: 12 }, (_, i) => infer(local.route(), `wine-${i % 4}`)));
    expect(statuses).toEqual(statuses.map(() => 200));
  }, 60_000);

  it('stops every process on Ctrl-C, exits 0 and leaves no cache folder behind', async () => {
    expect((await readdir(home)).filter((d) => d.startsWith('modelmux-local-'))).toHaveLength(1);
    local.child.kill('SIGINT');
    expect(await local.exited).toBe(0);
    // Only modelmux's own folders: onnxruntime writes telemetry logs of its own in TMPDIR.
    expect((await readdir(home)).filter((d) => d.startsWith('modelmux-'))).toEqual([]);
    const statuses = await Promise.all([local.route(), ...local.replicaUrls()].map((u) => infer(u, 'wine-0')));
    expect(statuses).toEqual([0, 0, 0, 0]);
  }, 60_000);
});
