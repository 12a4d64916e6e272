import { expect } from '@jest/globals';
import { nvidiaSmiDevice, parseGpuMemory, parseProcessMemory } from '../../../replica/device/nvidia-smi.js';

const MIB = 1024 ** 2;

describe('nvidia-smi', () => {
  it("asks about the device CUDA_VISIBLE_DEVICES makes onnxruntime's device 0", () => {
    expect(nvidiaSmiDevice({ CUDA_VISIBLE_DEVICES: '2,3' })).toBe('2');
    expect(nvidiaSmiDevice({ CUDA_VISIBLE_DEVICES: 'GPU-8a1b', NVIDIA_VISIBLE_DEVICES: 'all' })).toBe('GPU-8a1b');
  });

  it("passes on a container runtime's UUID but not its host index, which the container renumbers from 0", () => {
    expect(nvidiaSmiDevice({ NVIDIA_VISIBLE_DEVICES: 'GPU-77ef,GPU-88aa' })).toBe('GPU-77ef');
    expect(nvidiaSmiDevice({ NVIDIA_VISIBLE_DEVICES: '3' })).toBe('0');
    expect(nvidiaSmiDevice({ NVIDIA_VISIBLE_DEVICES: 'all' })).toBe('0');
    expect(nvidiaSmiDevice({})).toBe('0');
  });

  it('reads a memory figure in MiB', () => {
    expect(parseGpuMemory('81559\n')).toBe(81559 * MIB);
    expect(parseGpuMemory('[N/A]\n')).toBeUndefined();
    expect(parseGpuMemory('')).toBeUndefined();
  });

  it("finds the process's memory, 0 when it is not listed, undefined when the answer is unreadable", () => {
    expect(parseProcessMemory('1200, 4021\n5531, 612\n', 5531)).toBe(612 * MIB);
    expect(parseProcessMemory('1200, 4021\n', 5531)).toBe(0);
    expect(parseProcessMemory('', 5531)).toBe(0);
    expect(parseProcessMemory('No devices were found\n', 5531)).toBeUndefined();
  });
});
