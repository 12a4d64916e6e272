import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { ModelmuxError } from '../../../common/errors.js';
import type { ModelId } from '../../../common/model-id.js';
import { extractFolder, extractModel } from '../../../replica/store/archive-extract.js';
import { modelFolders } from '../../../replica/store/model-folders.js';
import { archiveBounds, chooseModel, DEFAULT_ARCHIVE_BOUNDS, entryDecision, type ArchiveBounds } from '../../../replica/store/archive-policy.js';
import { isArchiveId } from '../../../common/model-id.js';
import { modelKey } from '../../../replica/store/model-store.js';
import { tarBytes, tarGz, type TarEntry } from '../../../common/tar-gz.js';

const MODEL = new Uint8Array([8, 7, 18, 4, 116, 101, 115, 116]);
const CONFIG = '{"max_batch_size":8}';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'archive-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function unpack(archive: Buffer, bounds: ArchiveBounds = DEFAULT_ARCHIVE_BOUNDS): ReturnType<typeof extractModel> {
  return extractModel(Readable.from([archive]), 'archive "m.tar.gz"', join(dir, 'work'), join(dir, 'model.onnx'), bounds);
}

/** The archive_invalid refusal `archive` gets, its message matched by `reason`; nothing is left behind. */
async function refused(archive: Buffer, reason: RegExp, bounds?: ArchiveBounds): Promise<void> {
  const err = await unpack(archive, bounds).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ModelmuxError);
  expect((err as ModelmuxError).code).toBe('archive_invalid');
  expect((err as ModelmuxError).message).toMatch(reason);
  expect(readdirSync(dir)).toEqual([]);
}

describe('model archives: the model is found in the archive', () => {
  it('takes model.onnx at the top with the config.json beside it, and reads past the rest', async () => {
    const archive = await tarGz([
      { name: 'code/model.py', body: 'def handle(): pass' },
      { name: 'model.onnx', body: MODEL },
      { name: 'config.json', body: CONFIG },
      { name: 'serving.properties', body: 'engine=Python' },
    ]);
    const got = await unpack(archive);
    expect(new Uint8Array(readFileSync(join(dir, 'model.onnx')))).toEqual(MODEL);
    expect(got.bytes).toBe(MODEL.length);
    expect(Buffer.from(got.config ?? []).toString()).toBe(CONFIG);
    expect(readdirSync(dir)).toEqual(['model.onnx']);
  });

  it('takes the only *.onnx of the archive wherever it is, with a ./ prefix, and no config when none is beside it', async () => {
    const got = await unpack(
      await tarGz([
        { name: './export/wine.onnx', body: MODEL },
        { name: 'config.json', body: CONFIG },
      ]),
    );
    expect(new Uint8Array(readFileSync(join(dir, 'model.onnx')))).toEqual(MODEL);
    expect(got.config).toBeUndefined();
  });

  it('refuses an archive with no ONNX model, or several and no model.onnx at the top', async () => {
    await refused(await tarGz([{ name: 'model.joblib', body: 'x' }]), /no ONNX model/);
    await refused(
      await tarGz([
        { name: 'a.onnx', body: MODEL },
        { name: 'b/b.onnx', body: MODEL },
      ]),
      /2 \.onnx files/,
    );
  });
});

describe('model archives: hostile entries are refused before anything is written outside the folder', () => {
  it('refuses an entry that climbs out of the folder, and writes nothing there', async () => {
    await refused(await tarGz([{ name: '../escaped.onnx', body: MODEL }]), /climbs out/);
    await refused(await tarGz([{ name: 'a/../../escaped.onnx', body: MODEL }]), /climbs out/);
    expect(existsSync(join(dir, '..', 'escaped.onnx'))).toBe(false);
  });

  it('refuses absolute paths, backslashes and paths deeper than 16 folders', async () => {
    await refused(await tarGz([{ name: '/etc/model.onnx', body: MODEL }]), /absolute path/);
    await refused(await tarGz([{ name: '..\\model.onnx', body: MODEL }]), /backslash/);
    await refused(await tarGz([{ name: `${'d/'.repeat(17)}model.onnx`, body: MODEL }]), /folders deep/);
  });

  it('refuses symbolic and hard links, wherever they point', async () => {
    await refused(await tarGz([{ name: 'model.onnx', type: 'symlink', linkname: '/etc/passwd' }]), /is a link/);
    await refused(
      await tarGz([
        { name: 'x.onnx', body: MODEL },
        { name: 'model.onnx', type: 'link', linkname: 'x.onnx' },
      ]),
      /is a link/,
    );
  });

  it('refuses devices and fifos', async () => {
    await refused(await tarGz([{ name: 'model.onnx', type: 'fifo' }]), /is a fifo/);
  });
});

describe('model archives: every size is bounded', () => {
  const small: ArchiveBounds = { maxArchiveBytes: 1024 * 1024, maxUnpackedBytes: 64 * 1024, maxEntries: 4 };

  it('refuses a decompression bomb: a megabyte of zeros in a kilobyte of gzip, past the unpacked bound', async () => {
    const bomb = await tarGz([{ name: 'model.onnx', body: new Uint8Array(1024 * 1024) }]);
    expect(bomb.length).toBeLessThan(4 * 1024);
    await refused(bomb, /more than the 65536 bytes/, small);
  });

  it('refuses a bomb whose header lies about its size, as the gunzipped stream passes the bound', async () => {
    // A tar stream that never ends: ten megabytes of one entry header's worth of zeros after a small entry.
    const tar = await tarBytes([{ name: 'model.onnx', body: MODEL }]);
    const bomb = gzipSync(Buffer.concat([tar.subarray(0, tar.length - 1024), Buffer.alloc(10 * 1024 * 1024)]));
    await refused(bomb, /unpacked is larger than the 65536 bytes/, small);
  });

  it('refuses an archive larger than its bound as it streams in', async () => {
    const big = await tarGz([{ name: 'model.onnx', body: MODEL }]);
    await refused(big, /larger than the 16 bytes/, { ...small, maxArchiveBytes: 16 });
  });

  it('refuses more entries than the bound', async () => {
    const many: TarEntry[] = Array.from({ length: 5 }, (_, i) => ({ name: `f${i}.txt`, body: 'x' }));
    await refused(await tarGz(many), /more than 4 entries/, small);
  });

  it('refuses what is not a gzip-compressed tar, and a truncated one', async () => {
    await refused(Buffer.from('not an archive at all'), /not a readable gzip-compressed tar/);
    const whole = await tarGz([{ name: 'model.onnx', body: MODEL }]);
    await refused(whole.subarray(0, whole.length - 12), /not a readable gzip-compressed tar/);
  });

  it('bounds an archive as the model: as many bytes as --max-model-bytes, twice that unpacked', () => {
    expect(archiveBounds(1000)).toMatchObject({ maxArchiveBytes: 1000, maxUnpackedBytes: 2000 });
    expect(archiveBounds(undefined)).toBe(DEFAULT_ARCHIVE_BOUNDS);
  });
});

describe('model archives: the pure policy', () => {
  const start = { entries: 0, declaredBytes: 0 };

  it('keeps only ONNX files and config.json, skips folders and everything else', () => {
    expect(entryDecision({ name: './model.onnx', type: 'file', size: 1 }, start, DEFAULT_ARCHIVE_BOUNDS)).toEqual({ action: 'keep', path: 'model.onnx' });
    expect(entryDecision({ name: 'a/config.json', type: 'file', size: 1 }, start, DEFAULT_ARCHIVE_BOUNDS)).toEqual({ action: 'keep', path: 'a/config.json' });
    expect(entryDecision({ name: 'model.joblib', type: 'file', size: 1 }, start, DEFAULT_ARCHIVE_BOUNDS)).toEqual({ action: 'skip' });
    expect(entryDecision({ name: 'code/', type: 'directory', size: 0 }, start, DEFAULT_ARCHIVE_BOUNDS)).toEqual({ action: 'skip' });
  });

  it('refuses an entry whose declared size passes the unpacked bound before reading it', () => {
    const d = entryDecision({ name: 'model.onnx', type: 'file', size: 11 }, { entries: 1, declaredBytes: 90 }, { ...DEFAULT_ARCHIVE_BOUNDS, maxUnpackedBytes: 100 });
    expect(d).toMatchObject({ action: 'refuse' });
  });

  it('prefers model.onnx at the top over other ONNX files', () => {
    expect(chooseModel(['x/other.onnx', 'model.onnx', 'config.json'])).toEqual({ model: 'model.onnx', config: 'config.json' });
    expect(chooseModel(['x/m.onnx', 'x/config.json'])).toEqual({ model: 'x/m.onnx', config: 'x/config.json' });
  });

  it('names an archive by its key in the store, unversioned', () => {
    expect(isArchiveId('wine-3.tar.gz')).toBe(true);
    expect(isArchiveId('wine-3.tgz')).toBe(true);
    expect(isArchiveId('wine-3')).toBe(false);
    expect(isArchiveId('wine-3.tar.gz@2')).toBe(false);
    expect(modelKey('models', 'wine-3.tar.gz' as ModelId)).toBe('models/wine-3.tar.gz');
  });
});

describe('model archives for a sidecar runtime: the whole folder, by the same rules', () => {
  const files = [
    { name: 'model-settings.json', body: '{"implementation":"mlserver_sklearn.SKLearnModel"}' },
    { name: 'model.joblib', body: 'weights' },
    { name: 'extra/notes.txt', body: 'n' },
  ];
  const total = files.reduce((n, f) => n + f.body.length, 0);
  const mlserverArchive = (): Promise<Buffer> => tarGz(files);

  it('unpacks every regular file at its own path, the settings file renamed into place last', async () => {
    const order: string[] = [];
    const dest = join(dir, 'm.tar.gz');
    const bytes = await extractFolder(Readable.from([await mlserverArchive()]), 'archive "m.tar.gz"', dest, DEFAULT_ARCHIVE_BOUNDS, (p) => {
      order.push(p);
      return p === 'model-settings.json';
    });
    expect(readdirSync(dest, { recursive: true }).map(String).sort()).toEqual(['extra', 'extra/notes.txt', 'model-settings.json', 'model.joblib']);
    expect(readFileSync(join(dest, 'model.joblib'), 'utf8')).toBe('weights');
    expect(bytes).toBe(total);
    expect(order).toEqual(['model-settings.json', 'model.joblib', 'extra/notes.txt']);
  });

  it('refuses a link and leaves no folder behind', async () => {
    const dest = join(dir, 'm.tar.gz');
    const archive = await tarGz([
      { name: 'model-settings.json', body: '{}' },
      { name: 'model.joblib', type: 'symlink', linkname: '/etc/shadow' },
    ]);
    await expect(extractFolder(Readable.from([archive]), 'archive', dest, DEFAULT_ARCHIVE_BOUNDS, () => false)).rejects.toMatchObject({ code: 'archive_invalid' });
    expect(existsSync(dest)).toBe(false);
  });

  it("copies an archive of a file:// store into the runtime's models folder as the model's folder", async () => {
    const store = join(dir, 'store');
    mkdirSync(store);
    writeFileSync(join(store, 'm.tar.gz'), await mlserverArchive());
    const folders = modelFolders({ uri: `file://${store}`, modelsDir: join(dir, 'models') });
    expect(await folders.fetch('m.tar.gz' as ModelId)).toBe(total);
    expect(readFileSync(join(dir, 'models', 'm.tar.gz', 'model-settings.json'), 'utf8')).toContain('SKLearnModel');
    await expect(folders.fetch('none.tar.gz' as ModelId)).rejects.toMatchObject({ code: 'model_not_found' });
  });

  it("unpacks an archive whose key holds slashes into one folder named by the key with '/' as %2F, and removes that folder", async () => {
    const store = join(dir, 'store');
    mkdirSync(join(store, 'tenant', '7'), { recursive: true });
    writeFileSync(join(store, 'tenant', '7', 'm.tar.gz'), await mlserverArchive());
    const folders = modelFolders({ uri: `file://${store}`, modelsDir: join(dir, 'models') });
    await folders.fetch('tenant/7/m.tar.gz' as ModelId);
    expect(readdirSync(join(dir, 'models'))).toEqual(['tenant%2F7%2Fm.tar.gz']);
    expect(readFileSync(join(dir, 'models', 'tenant%2F7%2Fm.tar.gz', 'model-settings.json'), 'utf8')).toContain('SKLearnModel');
    await folders.remove('tenant/7/m.tar.gz' as ModelId);
    expect(readdirSync(join(dir, 'models'))).toEqual([]);
  });
});
