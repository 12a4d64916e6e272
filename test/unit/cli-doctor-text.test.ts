import { formatDoctorReport } from '../../cli/doctor-text.js';
import type { DoctorReport } from '../../common/cuda/provider-report.js';

const report: DoctorReport = {
  onnxruntime: { version: '1.30.0', library: '/c/lib/libonnxruntime.so.1' },
  providers: {
    cpu: { state: 'ok', reason: 'a CPU session runs' },
    cuda: {
      state: 'driver_missing',
      reason: 'driver missing (libcuda.so.1): every other library loads; the NVIDIA driver of a GPU node provides it',
      folder: '/c/lib',
      libraries: [
        { file: 'libcudart.so.13', loaded: true },
        { file: 'libonnxruntime_providers_cuda.so', loaded: false, missing: 'libcuda.so.1' },
      ],
    },
  },
  gpus: [],
};

describe('modelmux doctor’s text', () => {
  it('says each provider’s state, the libraries that do not load and what they miss, and the GPUs', () => {
    expect(formatDoctorReport(report)).toBe(
      [
        'onnxruntime 1.30.0 (/c/lib/libonnxruntime.so.1)',
        'cpu: ok',
        'cuda: driver_missing: driver missing (libcuda.so.1): every other library loads; the NVIDIA driver of a GPU node provides it',
        '  1 of 2 libraries of /c/lib load',
        '  libonnxruntime_providers_cuda.so: needs libcuda.so.1',
        'gpus: none seen',
        '',
      ].join('\n'),
    );
  });

  it('lists each GPU with what nvidia-smi said of it', () => {
    const text = formatDoctorReport({ ...report, gpus: [{ index: 0, name: 'NVIDIA H100 80GB HBM3', source: 'nvidia-smi', memoryMiB: 81559, driver: '580.95.05' }] });
    expect(text).toContain('gpus: 1\n  0: NVIDIA H100 80GB HBM3, 81559 MiB, driver 580.95.05 (nvidia-smi)\n');
  });
});
