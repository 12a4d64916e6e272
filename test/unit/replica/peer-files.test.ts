import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ModelId } from '../../../common/model-id.js';
import { PeerFiles } from '../../../replica/store/peer-files.js';

const id = (s: string): ModelId => s as ModelId;

let root: string;
let shared: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'peer-files-test-'));
  shared = join(root, 'shared');
});

afterEach(() => rmSync(root, { recursive: true, force: true }));

function ownerFile(name: string, body: string): { path: string; bytes: number } {
  const path = join(root, name);
  writeFileSync(path, body);
  return { path, bytes: Buffer.byteLength(body) };
}

describe('PeerFiles', () => {
  it('links the file a neighbour published, with its version and confirmation time, and the link outlives the original', () => {
    const peers = new PeerFiles(shared, () => undefined);
    const file = ownerFile('m1.a.onnx', 'weights-1');
    peers.publish(id('m1'), { ...file, etag: '"e1"', checkedAt: 1234 });

    const other = new PeerFiles(shared, () => undefined);
    const target = join(root, 'm1.b.onnx');
    expect(other.borrow(id('m1'), target)).toEqual({ path: target, bytes: file.bytes, etag: '"e1"', checkedAt: 1234 });
    rmSync(file.path);
    expect(readFileSync(target, 'utf8')).toBe('weights-1');
  });

  it('gives the latest record when a model is published again, and leaves no temporary files', () => {
    const peers = new PeerFiles(shared, () => undefined);
    peers.publish(id('m1'), { ...ownerFile('v1.onnx', 'one'), etag: '"e1"', checkedAt: 1 });
    peers.publish(id('m1'), { ...ownerFile('v2.onnx', 'two!'), etag: '"e2"', checkedAt: 2 });
    const got = peers.borrow(id('m1'), join(root, 'got.onnx'));
    expect(got?.etag).toBe('"e2"');
    expect(readFileSync(join(root, 'got.onnx'), 'utf8')).toBe('two!');
    expect(readdirSync(shared)).toEqual(['m1.json']);
  });

  it('finds nothing without a record, with a record whose file is gone, or with a record that does not parse', () => {
    const peers = new PeerFiles(shared, () => undefined);
    expect(peers.borrow(id('none'), join(root, 'a.onnx'))).toBeUndefined();

    const gone = ownerFile('gone.onnx', 'x');
    peers.publish(id('gone'), { ...gone, etag: '"e"', checkedAt: 1 });
    rmSync(gone.path);
    expect(peers.borrow(id('gone'), join(root, 'b.onnx'))).toBeUndefined();

    writeFileSync(join(shared, 'junk.json'), '{"path": 7}');
    expect(peers.borrow(id('junk'), join(root, 'c.onnx'))).toBeUndefined();
    writeFileSync(join(shared, 'half.json'), '{"path": "/x", "by');
    expect(peers.borrow(id('half'), join(root, 'd.onnx'))).toBeUndefined();
  });

  it('refuses a file whose size is not the recorded one, and leaves no link behind', () => {
    const peers = new PeerFiles(shared, () => undefined);
    const file = ownerFile('m.onnx', 'full weights');
    peers.publish(id('m'), { ...file, bytes: file.bytes + 1, etag: '"e"', checkedAt: 1 });
    const target = join(root, 'linked.onnx');
    expect(peers.borrow(id('m'), target)).toBeUndefined();
    expect(existsSync(target)).toBe(false);
  });

  it('publishes nothing for a file without an ETag: a borrower could never revalidate it', () => {
    const peers = new PeerFiles(shared, () => undefined);
    peers.publish(id('m'), { ...ownerFile('m.onnx', 'w'), etag: '', checkedAt: 1 });
    expect(readdirSync(shared)).toEqual([]);
  });

  it('refuses a folder that other users could write: a record chooses the file the replicas load', () => {
    mkdirSync(shared);
    chmodSync(shared, 0o777);
    expect(() => new PeerFiles(shared, () => undefined)).toThrow(/writable by it alone/);
    chmodSync(shared, 0o700);
    expect(() => new PeerFiles(shared, () => undefined)).not.toThrow();
  });
});
