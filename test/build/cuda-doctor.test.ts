import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { doctorReportSchema, type DoctorReport } from '../../common/cuda/provider-report.js';

// `npm run install:cuda` must give a CUDA provider whose every library loads, leaving only what a
// GPU node supplies (the driver's libcuda.so.1, or the device): the doctor says so from dist/, in a
// process of its own, as a replica would start. CI installs it (.ci/run) and sets
// MODELMUX_REQUIRE_CUDA_LIBS, so a missing install fails there; elsewhere it is skipped, saying why.
// Loading 2.4 GB of libraries takes a second with them in the page cache, minutes from a cold disk
// on a busy machine (242 s once, at a load average of 12 on 2 cores): hence the long timeouts.

const run = promisify(execFile);
const ORT_VERSION = (JSON.parse(readFileSync('node_modules/onnxruntime-node/package.json', 'utf8')) as { version: string }).version;
const DEFAULT_FOLDER = join(process.env.MODELMUX_CACHE ?? join(homedir(), '.cache/modelmux'), `cuda-ort-${ORT_VERSION}`, 'lib');
const folder = process.env.MODELMUX_CUDA_LIBS ?? (existsSync(DEFAULT_FOLDER) ? DEFAULT_FOLDER : undefined);
const required = process.env.MODELMUX_REQUIRE_CUDA_LIBS === '1' || process.env.CI !== undefined;
const WHY_ABSENT = `no CUDA install at MODELMUX_CUDA_LIBS or ${DEFAULT_FOLDER}: run \`npm run install:cuda\` (about 1.5 GB of PyPI wheels, cached outside the clone)`;
if (folder === undefined && !required) process.stderr.write(`cuda-doctor: skipped, ${WHY_ABSENT}\n`);

/** Every library the CUDA provider needs, from onnxruntime-gpu's and NVIDIA's wheels (native/cuda/wheels.lock). */
const EXPECTED = [
  'libonnxruntime.so.1',
  'libonnxruntime_providers_shared.so',
  'libonnxruntime_providers_cuda.so',
  'libcudart.so.13',
  'libcublas.so.13',
  'libcublasLt.so.13',
  'libcudnn.so.9',
  'libcufft.so.12',
  'libcurand.so.10',
  'libnvrtc.so.13',
];

/** Whether this machine has the NVIDIA driver's library: then the state is about the device, not the driver. */
function driverPresent(): boolean {
  try {
    process.dlopen({ exports: {} }, 'libcuda.so.1');
    return true;
  } catch (err) {
    return !/cannot open shared object file/.test(err instanceof Error ? err.message : String(err));
  }
}

async function modelmux(args: string[], cudaFolder: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['dist/cli/main.js', ...args], { env: { ...process.env, MODELMUX_CUDA_LIBS: cudaFolder }, maxBuffer: 16 * 1024 * 1024 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

(folder !== undefined || required ? describe : describe.skip)('the CUDA provider of npm run install:cuda', () => {
  let report: DoctorReport;
  beforeAll(async () => {
    if (folder === undefined) throw new Error(WHY_ABSENT);
    const { code, stdout, stderr } = await modelmux(['doctor', '--json'], folder);
    if (code !== 0) throw new Error(`modelmux doctor exited ${code}: ${stderr}`);
    report = doctorReportSchema.parse(JSON.parse(stdout));
  }, 300_000);

  it('loads onnxruntime-node’s version of the core library from the CUDA folder, and still runs CPU sessions', () => {
    expect(report.onnxruntime).toEqual({ version: ORT_VERSION, library: join(folder ?? '', 'libonnxruntime.so.1') });
    expect(report.providers.cpu.state).toBe('ok');
  });

  it('loads the provider and every CUDA library, but for the driver’s libcuda.so.1', () => {
    const { libraries } = report.providers.cuda;
    expect(libraries.map((l) => l.file)).toEqual(expect.arrayContaining(EXPECTED));
    const notLoaded = libraries.filter((l) => !l.loaded);
    expect(notLoaded.filter((l) => l.missing !== 'libcuda.so.1')).toEqual([]);
    if (!driverPresent()) expect(notLoaded.map((l) => l.file)).toContain('libonnxruntime_providers_cuda.so');
  });

  it('reports exactly what is missing here: the driver, else the device, else nothing', () => {
    const { state, reason } = report.providers.cuda;
    if (!driverPresent()) {
      expect(state).toBe('driver_missing');
      expect(reason).toMatch(/^driver missing \(libcuda\.so\.1\)/);
    } else {
      expect(state).toBe(report.gpus.length === 0 ? 'no_device' : 'ok');
    }
  });

  it('makes a replica asked for cuda where it cannot run exit 2 at start, naming the reason', async () => {
    if (report.providers.cuda.state === 'ok') return;
    const { code, stderr } = await modelmux(['replica', '--model-source', 'file:///nonexistent', '--execution-provider', 'cuda', '--port', '0'], folder ?? '');
    expect(code).toBe(2);
    expect(stderr).toContain(`execution provider "cuda" cannot run here: ${report.providers.cuda.state}: ${report.providers.cuda.reason}`);
  }, 300_000);
});
