import { compareVersions, isModelVersion, joinModelId, sortVersions, splitModelId } from '../../common/model-version.js';
import { folderKey, modelFolder, modelKey } from '../../replica/store/model-store.js';
import type { ModelId } from '../../common/model-id.js';

describe('model versions', () => {
  it('knows a version as 1 to 18 digits', () => {
    for (const v of ['0', '1', '007', '9'.repeat(18)]) expect(isModelVersion(v)).toBe(true);
    for (const v of ['', '-1', '1.0', 'v1', '1a', '9'.repeat(19), ' 1']) expect(isModelVersion(v)).toBe(false);
  });

  it('splits and joins id@v, the default version having none', () => {
    expect(splitModelId('wine-7@2')).toEqual({ base: 'wine-7', version: '2' });
    expect(splitModelId('wine-7')).toEqual({ base: 'wine-7', version: undefined });
    for (const id of ['wine-7@2', 'wine-7', 'a:b@0']) {
      const { base, version } = splitModelId(id);
      expect(joinModelId(base, version)).toBe(id);
    }
  });

  it('orders versions by number, equal numbers by their text', () => {
    expect(sortVersions(['10', '2', '01', '1', '9'.repeat(18), '3'])).toEqual(['01', '1', '2', '3', '10', '9'.repeat(18)]);
    expect(compareVersions('2', '2')).toBe(0);
  });

  it('puts version v of id in the folder <id>/<v>/ below the default version', () => {
    expect(modelFolder('wine-7' as ModelId)).toBe('wine-7');
    expect(modelFolder('wine-7@2' as ModelId)).toBe('wine-7/2');
    expect(modelKey('', 'wine-7@2' as ModelId)).toBe('wine-7/2/model.onnx');
    expect(modelKey('/models/', 'wine-7@2' as ModelId)).toBe('models/wine-7/2/model.onnx');
    expect(modelKey('models', 'wine-7' as ModelId)).toBe('models/wine-7/model.onnx');
    expect(folderKey('/a/b', 'm@1' as ModelId)).toBe('a/b/m/1');
  });
});
