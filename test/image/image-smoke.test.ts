import { existsSync, readFileSync } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { HEADER_RAY_MODEL_ID, HEADER_SAGEMAKER_MODEL } from '../../common/names.js';
import type { ModelInferResponse } from '../../common/grpc/inference-service.js';
import { SAMPLE_WINE, WINE_FEATURES, WINE_INPUT, wineForward, wineWeights } from '../../common/wine-model.js';
import { ensureBuiltImage, IMAGE_BUILD_TIMEOUT_MS, runImage, runImageToEnd, type BuiltImage, type ImageProcess } from '../../harness/image-container.js';
import { inferenceClientFor } from '../helpers/grpc-client.js';

// The image a user builds from the Dockerfile (test/tools/build-image.sh builds it unchanged with
// buildah; .ci/run builds it before the tests), run as the chart runs it: user 10001, read-only
// root filesystem, writable only where the pods mount emptyDirs. docs/testing.md#the-image.

/** Where the chart's pods mount their emptyDirs (operator/resources/deployment.ts, helm/): the only writable paths. */
const TMP = '/tmp';
const MODEL_CACHE = '/var/cache/modelmux';
const UID = 10001;

/**
 * Commands run to their end in the image, each expected to exit 0 (and print what `says`
 * matches), besides `--help` of every subcommand the image's `modelmux --help` lists: a
 * subcommand that does more than serve joins here.
 */
const RUNS: readonly { args: readonly string[]; says?: RegExp }[] = [
  { args: ['models', '--out', `${TMP}/models`, '--count', '2'] },
  // The CPU image: onnxruntime-node's own CPU provider runs a session.
  { args: ['doctor'], says: /^cpu: ok$/m },
];

const START_TIMEOUT_MS = 180_000;

let image: BuiltImage;

beforeAll(() => {
  image = ensureBuiltImage(process.cwd(), 'image tier');
}, IMAGE_BUILD_TIMEOUT_MS);

/** Every entry below `dir`, depth first. */
async function* walk(dir: string): AsyncGenerator<string> {
  for (const name of await readdir(dir)) {
    const path = join(dir, name);
    yield path;
    if ((await lstat(path)).isDirectory()) yield* walk(path);
  }
}

describe('the image built from the Dockerfile', () => {
  it('runs node on the CLI as numeric user 10001, the user the chart runs it as', () => {
    expect(image.config.user).toBe(`${UID}:${UID}`);
    expect(image.config.entrypoint).toEqual(['node', '/app/dist/cli/main.js']);
    expect(image.config.env).toContain('NODE_ENV=production');
  });

  it('holds the programs and their production dependencies, and no dev dependency, test, bench or harness code', async () => {
    const app = join(image.rootfs, 'app');
    expect((await readdir(app)).sort()).toEqual(['common', 'dist', 'node_modules', 'package.json']);
    const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as { packages: Record<string, { dev?: boolean; optional?: boolean }> };
    const packages = Object.entries(lock.packages).filter(([path]) => path.startsWith('node_modules/'));
    const present = packages.filter(([path]) => existsSync(join(app, path))).map(([path]) => path);
    expect(present.filter((path) => lock.packages[path]?.dev === true)).toEqual([]);
    // Every production dependency is there (optional ones only where this platform installs them).
    const missing = packages.filter(([path, p]) => p.dev !== true && p.optional !== true && !present.includes(path)).map(([path]) => path);
    expect(missing).toEqual([]);
    expect((await readdir(join(app, 'dist'))).sort()).toEqual(['cli', 'common', 'native', 'operator', 'replica', 'router']);
    const testCode: string[] = [];
    for await (const path of walk(join(app, 'dist'))) if (/\.test\.js$|\.ts$/.test(path) && !path.endsWith('.d.ts')) testCode.push(path);
    expect(testCode).toEqual([]);
    expect(existsSync(join(app, 'dist/native/file-map.node'))).toBe(true);
    expect(existsSync(join(app, 'common/grpc/grpc_predict_v2.proto'))).toBe(true);
  });

  it('keeps /app readable by user 10001 and writable by root alone', async () => {
    const problems: string[] = [];
    for await (const path of walk(join(image.rootfs, 'app'))) {
      const s = await lstat(path);
      if (s.isSymbolicLink()) continue;
      // 10001 is neither the owner nor in the group: the "other" bits are what it gets.
      const readable = (s.mode & 0o004) !== 0 && (!s.isDirectory() || (s.mode & 0o001) !== 0);
      if (!readable) problems.push(`${path}: mode ${(s.mode & 0o777).toString(8)}, not readable by ${UID}`);
      if (s.uid === UID || (s.mode & 0o002) !== 0) problems.push(`${path}: writable by ${UID}`);
    }
    expect(problems.slice(0, 20)).toEqual([]);
  }, 60_000);
});

describe('the image run as the chart runs it (user 10001, read-only root, emptyDirs on /tmp and the model cache)', () => {
  const asChart = { emptyDirs: [TMP, MODEL_CACHE] };

  it('is run by this harness with a read-only root, as user 10001, writable only on the emptyDirs', async () => {
    const probe = `
      const fs = require('node:fs');
      const tryWrite = (p) => { try { fs.writeFileSync(p, ''); return 'ok'; } catch (e) { return e.code; } };
      console.log(JSON.stringify({ uid: process.getuid(), gid: process.getgid(), cwd: process.cwd(),
        app: tryWrite('/app/x'), root: tryWrite('/x'), tmp: tryWrite('${TMP}/x'), cache: tryWrite('${MODEL_CACHE}/x') }));`;
    const r = await runImageToEnd(image, { ...asChart, command: ['node', '-e', probe] });
    expect({ code: r.code, output: r.output }).toMatchObject({ code: 0 });
    expect(JSON.parse(r.stdout)).toEqual({ uid: UID, gid: UID, cwd: '/app', app: 'EROFS', root: 'EROFS', tmp: 'ok', cache: 'ok' });
  }, 60_000);

  it('loads the native addon it built (mapped model weights) in the image', async () => {
    const r = await runImageToEnd(image, { ...asChart, command: ['node', '-e', "require('/app/dist/native/file-map.node'); console.log('loaded')"] });
    expect({ code: r.code, output: r.output }).toEqual({ code: 0, output: 'loaded\n' });
  }, 60_000);

  it('starts `modelmux --help` and every subcommand it lists with --help', async () => {
    const help = await runImageToEnd(image, { ...asChart, args: ['--help'] });
    expect({ code: help.code, output: help.output }).toMatchObject({ code: 0 });
    const commands = [...help.stdout.matchAll(/^ {2}(\S+)\s/gm)].map((m) => m[1] ?? '');
    expect(commands).toEqual(expect.arrayContaining(['local', 'replica', 'router', 'operator', 'models']));
    for (const name of commands) {
      const r = await runImageToEnd(image, { ...asChart, args: [name, '--help'] });
      expect({ name, code: r.code, usage: r.stdout.startsWith(`usage: modelmux ${name}`) ? 'ok' : r.output }).toEqual({ name, code: 0, usage: 'ok' });
    }
  }, 120_000);

  it.each(RUNS.map((run) => [run.args.join(' '), run] as const))(
    'runs `modelmux %s` to a clean exit',
    async (_, { args, says }) => {
      const r = await runImageToEnd(image, { ...asChart, args });
      const ok = r.code === 0 && (says === undefined || says.test(r.stdout));
      expect({ code: r.code, output: ok ? '' : r.output }).toEqual({ code: 0, output: '' });
    },
    60_000,
  );

  describe('`modelmux local` serving the example models from the model cache', () => {
    let local: ImageProcess | undefined;
    const route = (): string => /^\s+route\s+(\S+)$/m.exec(local?.stdout() ?? '')?.[1] ?? '';

    beforeAll(async () => {
      local = await runImage(image, {
        ...asChart,
        args: ['local', '--replicas', '2', '--max-models', '2', '--example-models', '3', '--model-source', `file://${MODEL_CACHE}/models`, '--port', '0', '--grpc-port', '0', '--admin-port', '0'],
      });
      const deadline = Date.now() + START_TIMEOUT_MS - 5000;
      while (!local.stdout().includes('Press Ctrl-C to stop.')) {
        if (local.child.exitCode !== null || Date.now() > deadline) throw new Error(`modelmux local did not come up in the image:\n${local.output()}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    }, START_TIMEOUT_MS);

    afterAll(async () => {
      await local?.stop();
    }, 30_000);

    it('answers the three request forms with the reference forward pass', async () => {
      const body = JSON.stringify({ inputs: [{ name: WINE_INPUT, shape: [1, WINE_FEATURES], datatype: 'FP32', data: SAMPLE_WINE }] });
      const forms = [
        { model: 'wine-0', url: `${route()}/v2/models/wine-0/infer`, headers: {} },
        { model: 'wine-1', url: `${route()}/`, headers: { [HEADER_RAY_MODEL_ID]: 'wine-1' } },
        { model: 'wine-2', url: `${route()}/invocations`, headers: { [HEADER_SAGEMAKER_MODEL]: 'wine-2' } },
      ];
      for (const form of forms) {
        const res = await fetch(form.url, { method: 'POST', headers: { 'content-type': 'application/json', ...form.headers }, body });
        const answer = (await res.json()) as { outputs?: { data?: number[] }[] };
        expect({ url: form.url, status: res.status, answer: res.status === 200 ? 'ok' : answer }).toEqual({ url: form.url, status: 200, answer: 'ok' });
        expect(answer.outputs?.[0]?.data?.[0]).toBeCloseTo(wineForward(wineWeights(form.model), [SAMPLE_WINE])[0] ?? NaN, 4);
      }
    }, 60_000);

    it('answers ModelInfer over gRPC with the reference forward pass', async () => {
      const address = /^\s+grpc\s+(\S+)$/m.exec(local?.stdout() ?? '')?.[1] ?? '';
      const client = inferenceClientFor(address);
      try {
        const answer = await client.call<ModelInferResponse>('ModelInfer', {
          model_name: 'wine-1',
          inputs: [{ name: WINE_INPUT, datatype: 'FP32', shape: [1, WINE_FEATURES], contents: { fp32_contents: [...SAMPLE_WINE] } }],
        });
        expect(answer.ok ? 'ok' : answer).toBe('ok');
        if (answer.ok) expect(answer.value.outputs[0]?.contents?.fp32_contents?.[0]).toBeCloseTo(wineForward(wineWeights('wine-1'), [SAMPLE_WINE])[0] ?? NaN, 4);
      } finally {
        client.close();
      }
    }, 60_000);

    it('stops cleanly on SIGTERM, as a pod is stopped', async () => {
      expect(await local?.stop(20_000)).toBe(0);
    }, 30_000);
  });
});
