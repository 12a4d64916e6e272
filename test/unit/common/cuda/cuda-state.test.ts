import { cudaStatus, type CudaFacts } from '../../../../common/cuda/cuda-state.js';
import { classifyLoad } from '../../../../common/cuda/library-load.js';
import { doctorReportSchema, type LibraryCheck } from '../../../../common/cuda/provider-report.js';

const FOLDER = '/cache/cuda-ort-1.30.0/lib';
const ok = (file: string): LibraryCheck => ({ file, loaded: true });
const needs = (file: string, missing: string): LibraryCheck => ({ file, loaded: false, missing, error: `${missing}: cannot open shared object file: No such file or directory` });
const facts = (libraries: LibraryCheck[], over: Partial<CudaFacts> = {}): CudaFacts => ({ folder: FOLDER, libraries, probe: undefined, gpus: [], ...over });

describe('the CUDA provider’s state', () => {
  it('is library_missing without a CUDA folder, saying how to install one', () => {
    const s = cudaStatus(facts([], { folder: undefined }));
    expect(s.state).toBe('library_missing');
    expect(s.reason).toMatch(/npm run install:cuda.*MODELMUX_CUDA_LIBS/);
  });

  it('is library_missing when the folder lacks the provider library', () => {
    expect(cudaStatus(facts([ok('libcudart.so.13')]))).toEqual({ state: 'library_missing', reason: `library missing (libonnxruntime_providers_cuda.so): not in ${FOLDER}` });
  });

  it('names the first library whose dependency is missing, ahead of the driver', () => {
    const s = cudaStatus(facts([needs('libcublas.so.13', 'libcublasLt.so.13'), needs('libonnxruntime_providers_cuda.so', 'libcuda.so.1')]));
    expect(s).toEqual({ state: 'library_missing', reason: 'library missing (libcublasLt.so.13): libcublas.so.13 needs libcublasLt.so.13' });
  });

  it('is driver_missing when every library loads but for libcuda.so.1', () => {
    const s = cudaStatus(facts([ok('libcudart.so.13'), needs('libonnxruntime_providers_cuda.so', 'libcuda.so.1')]));
    expect(s.state).toBe('driver_missing');
    expect(s.reason).toMatch(/^driver missing \(libcuda\.so\.1\): every other library loads/);
  });

  it('is no_device when every library loads but a CUDA session fails, and ok when it runs', () => {
    const all = [ok('libcudart.so.13'), ok('libonnxruntime_providers_cuda.so')];
    const failed = cudaStatus(facts(all, { probe: { ok: false, error: 'CUDA failure 100: no CUDA-capable device is detected' } }));
    expect(failed.state).toBe('no_device');
    expect(failed.reason).toMatch(/no GPU is visible.*no CUDA-capable device/);
    expect(cudaStatus(facts(all, { probe: { ok: true }, gpus: [{ index: 0, name: 'NVIDIA H100', source: 'proc' }] })).state).toBe('ok');
  });
});

describe('a library’s load', () => {
  it('counts Node’s refusal of a plain library as loaded, and reads the missing dependency from the loader', () => {
    expect(classifyLoad('libcudart.so.13', "Module did not self-register: '/x/libcudart.so.13'.")).toEqual({ file: 'libcudart.so.13', loaded: true });
    expect(classifyLoad('p.so', 'libcuda.so.1: cannot open shared object file: No such file or directory')).toMatchObject({ loaded: false, missing: 'libcuda.so.1' });
    expect(classifyLoad('p.so', '/x/p.so: undefined symbol: cudnnCreate')).toEqual({ file: 'p.so', loaded: false, error: '/x/p.so: undefined symbol: cudnnCreate' });
  });
});

describe('the doctor’s JSON', () => {
  it('rejects a state outside the catalogue', () => {
    const report = {
      onnxruntime: { version: '1.30.0', library: '/x/libonnxruntime.so.1' },
      providers: { cpu: { state: 'ok', reason: '' }, cuda: { state: 'broken', reason: '', libraries: [] } },
      gpus: [],
    };
    expect(doctorReportSchema.safeParse(report).success).toBe(false);
  });
});
