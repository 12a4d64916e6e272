import { relaunchEnv } from '../../../../common/cuda/cuda-libraries.js';

describe('the relaunch with the CUDA folder on the library path', () => {
  it('puts the folder first on the library path when it is not there yet', () => {
    expect(relaunchEnv({ MODELMUX_CUDA_LIBS: '/c/lib', LD_LIBRARY_PATH: '/usr/local/lib' })?.LD_LIBRARY_PATH).toBe('/c/lib:/usr/local/lib');
    expect(relaunchEnv({ MODELMUX_CUDA_LIBS: '/c/lib' })?.LD_LIBRARY_PATH).toBe('/c/lib');
  });

  it('does nothing without a folder, or when the image already put it there (no relaunch loop)', () => {
    expect(relaunchEnv({})).toBeUndefined();
    expect(relaunchEnv({ MODELMUX_CUDA_LIBS: '' })).toBeUndefined();
    expect(relaunchEnv({ MODELMUX_CUDA_LIBS: '/c/lib', LD_LIBRARY_PATH: '/x:/c/lib' })).toBeUndefined();
  });
});
