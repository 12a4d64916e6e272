import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ModelmuxError } from '../../../common/errors.js';
import type { ModelId } from '../../../common/model-id.js';
import { FileModelStore } from '../../../replica/store/file-model-store.js';
import { folderBytes } from '../../../replica/store/folder-bytes.js';

const id = (s: string): ModelId => s as ModelId;
let dir: string;
let store: FileModelStore;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'modelmux-file-versions-'));
  const put = async (path: string, bytes: number): Promise<void> => {
    await mkdir(join(dir, path, '..'), { recursive: true });
    await writeFile(join(dir, path), new Uint8Array(bytes));
  };
  await put('m/model.onnx', 100);
  await put('m/weights/w.bin', 10);
  await put('m/1/model.onnx', 1000);
  await put('m/20/model.onnx', 2000);
  await put('m/20/config.json', 2);
  await put('m/notes/readme', 5);
  await put('only-versions/3/model.onnx', 7);
  store = new FileModelStore(pathToFileURL(dir).href, undefined, { now: () => 0 });
});

afterAll(() => rm(dir, { recursive: true, force: true }));

describe('a file:// store with versions', () => {
  it('fetches each version from its own folder, the default version without the versions below it', async () => {
    const base = await store.fetch(id('m'));
    expect([base.path, base.bytes, base.config]).toEqual([join(dir, 'm', 'model.onnx'), 115, undefined]);
    const twenty = await store.fetch(id('m@20'));
    expect([twenty.path, twenty.bytes, twenty.config?.length]).toEqual([join(dir, 'm', '20', 'model.onnx'), 2002, 2]);
    expect((await store.fetch(id('only-versions@3'))).bytes).toBe(7);
    expect(await store.version(id('m@1'))).not.toBe(await store.version(id('m')));
  });

  it('answers model_not_found for a version or default version the store lacks', async () => {
    for (const missing of ['m@2', 'only-versions', 'nobody@1']) {
      await expect(store.fetch(id(missing))).rejects.toMatchObject({ code: 'model_not_found' } satisfies Partial<ModelmuxError>);
    }
  });

  it('lists the numbered folders of a model, none for a model it lacks', async () => {
    expect((await store.listVersions(id('m'))).sort()).toEqual(['1', '20']);
    expect(await store.listVersions(id('only-versions'))).toEqual(['3']);
    expect(await store.listVersions(id('nobody'))).toEqual([]);
  });

  it('counts every file of a folder unless a top-level folder is skipped', async () => {
    expect(await folderBytes(join(dir, 'm'))).toBe(3117);
    expect(await folderBytes(join(dir, 'm'), (name) => name === '1' || name === '20')).toBe(115);
  });
});
