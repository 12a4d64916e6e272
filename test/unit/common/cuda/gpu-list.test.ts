import { parseNvidiaSmi, parseProcInformation } from '../../../../common/cuda/gpu-list.js';

describe('the GPUs seen', () => {
  it('reads nvidia-smi’s CSV rows', () => {
    expect(parseNvidiaSmi('0, NVIDIA H100 80GB HBM3, 81559, 580.95.05\n1, NVIDIA H100 80GB HBM3, 81559, 580.95.05\n')).toEqual([
      { index: 0, name: 'NVIDIA H100 80GB HBM3', source: 'nvidia-smi', memoryMiB: 81559, driver: '580.95.05' },
      { index: 1, name: 'NVIDIA H100 80GB HBM3', source: 'nvidia-smi', memoryMiB: 81559, driver: '580.95.05' },
    ]);
    expect(parseNvidiaSmi('No devices were found\n')).toEqual([]);
  });

  it('reads the model from the kernel module’s information file', () => {
    expect(parseProcInformation(0, 'Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 123\n')).toEqual({ index: 0, name: 'NVIDIA H100 80GB HBM3', source: 'proc' });
  });
});
