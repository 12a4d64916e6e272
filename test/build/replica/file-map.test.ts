import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeOnnxModel } from '../../../common/onnx-writer.js';
import { wineModelBytes } from '../../../common/wine-model.js';
import { WEIGHT_ALIGNMENT, weightsAligned } from '../../../replica/onnx/aligned-weights.js';
import { runNodeScript } from '../../helpers/node-script.js';

// The mapper is a native module (dist/native/file-map.node, built by `npm run build`): it is
// exercised from dist in a Node process of its own, as the replica loads it.

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'modelmux-file-map-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface Mapped {
  unavailable?: string;
  first: number[];
  length: number;
  afterUnmap: number;
  viewAfterUnmap: number;
  missing: string;
}

describe('the file mapper', () => {
  it('maps a file as an ArrayBuffer, and empties it and its views when unmapped', async () => {
    const path = join(dir, 'bytes');
    await writeFile(
      path,
      Uint8Array.from({ length: 10_000 }, (_, i) => i % 251),
    );
    const got = await runNodeScript<Mapped>(`
      import { loadFileMapper } from './dist/replica/onnx/file-map.js';
      const m = loadFileMapper();
      if ('unavailable' in m) { console.log(JSON.stringify(m)); process.exit(0); }
      const buffer = m.map(${JSON.stringify(path)});
      const view = new Uint8Array(buffer, 100, 50);
      const first = Array.from(new Uint8Array(buffer, 0, 5));
      const length = buffer.byteLength;
      m.unmap(buffer);
      m.unmap(buffer); // a second unmap is harmless
      let missing = '';
      try { m.map(${JSON.stringify(join(dir, 'nothing-here'))}); } catch (err) { missing = err.code; }
      console.log(JSON.stringify({ first, length, afterUnmap: buffer.byteLength, viewAfterUnmap: view.length, missing }));
    `);
    // CI builds it (MODELMUX_REQUIRE_NATIVE=1); elsewhere the build printed why it could not.
    // A Node built with V8's sandbox would refuse the mapping (napi_no_external_buffers_allowed):
    // map() would throw EMAP here.
    expect(got.unavailable).toBeUndefined();
    expect(got).toEqual({ first: [0, 1, 2, 3, 4], length: 10_000, afterUnmap: 0, viewAfterUnmap: 0, missing: 'ENOENT' });
  });

  it('unmaps a buffer the program dropped when it is collected, refuses buffers it did not map, and maps empty files', async () => {
    const path = join(dir, 'dropped');
    await writeFile(path, Buffer.alloc(1 << 20, 7));
    await writeFile(join(dir, 'empty'), '');
    const got = await runNodeScript<{ before: boolean; after: boolean; foreign: string; empty: number }>(
      `
      import { readFileSync } from 'node:fs';
      import { setImmediate } from 'node:timers/promises';
      import { loadFileMapper } from './dist/replica/onnx/file-map.js';
      const m = loadFileMapper();
      const mapped = () => readFileSync('/proc/self/maps', 'utf8').includes(${JSON.stringify(path)});
      (() => { const b = m.map(${JSON.stringify(path)}); if (new Uint8Array(b)[0] !== 7) throw new Error('wrong bytes'); })();
      const before = mapped();
      for (let i = 0; i < 5 && mapped(); i++) { globalThis.gc(); await setImmediate(); }
      let foreign = '';
      try { m.unmap(new ArrayBuffer(8)); } catch (err) { foreign = err.name; }
      const empty = m.map(${JSON.stringify(join(dir, 'empty'))});
      m.unmap(empty);
      console.log(JSON.stringify({ before, after: mapped(), foreign, empty: empty.byteLength }));
    `,
      ['--expose-gc'],
    );
    expect(got).toEqual({ before: true, after: false, foreign: 'TypeError', empty: 0 });
  });

  it('has V8 count a mapping as external memory until unmap() detaches it, and no longer', async () => {
    // What Node-API gives (docs/adr/0023-mappings-v8-does-not-count.md): its external ArrayBuffers
    // free through a finalizer, so V8 counts their bytes, and fresh mappings past a threshold
    // make it scavenge. unmap() must hand the bytes back at once, not at a later collection.
    const files = Array.from({ length: 8 }, (_, i) => join(dir, `counted-${i}`));
    await Promise.all(files.map((f, i) => writeFile(f, Buffer.alloc(5 << 20, i))));
    const got = await runNodeScript<{ mapped: number; unmapped: number }>(`
      import { loadFileMapper } from './dist/replica/onnx/file-map.js';
      const m = loadFileMapper();
      const external = () => process.memoryUsage().external;
      const before = external();
      const buffers = ${JSON.stringify(files)}.map((f) => m.map(f));
      const mapped = external() - before;
      for (const b of buffers) m.unmap(b);
      console.log(JSON.stringify({ mapped, unmapped: external() - before }));
    `);
    const bytes = 8 * (5 << 20);
    expect(got.mapped).toBeGreaterThanOrEqual(bytes);
    expect(got.mapped).toBeLessThan(bytes + (1 << 20));
    expect(Math.abs(got.unmapped)).toBeLessThan(1 << 20);
  });

  it('rewrites a downloaded model once so that its weights are aligned, and leaves other files alone', async () => {
    const wine = join(dir, 'wine.onnx');
    const relu = join(dir, 'relu.onnx');
    const reluBytes = encodeOnnxModel({
      name: 'relu',
      opset: 13,
      inputs: [{ name: 'x', shape: [1, 2] }],
      outputs: [{ name: 'y', shape: [1, 2] }],
      initializers: [],
      nodes: [{ opType: 'Relu', inputs: ['x'], outputs: ['y'] }],
    });
    await writeFile(wine, wineModelBytes('m1', 1000));
    await writeFile(relu, reluBytes);
    const sizes = await runNodeScript<(number | null)[]>(`
      import { alignFileWeights } from './dist/replica/onnx/file-map.js';
      const sizes = [];
      // Not past a byte bound: the padding would make the file larger than the replica may hold.
      sizes.push((await alignFileWeights(${JSON.stringify(wine)}, ${wineModelBytes('m1', 1000).length})) ?? null);
      for (const p of ${JSON.stringify([wine, wine, relu])}) sizes.push((await alignFileWeights(p)) ?? null);
      console.log(JSON.stringify(sizes));
    `);
    const after = await readFile(wine);
    expect(sizes).toEqual([null, after.length, null, null]);
    expect(weightsAligned(after, WEIGHT_ALIGNMENT)).toBe(true);
    expect(Buffer.compare(await readFile(relu), Buffer.from(reluBytes))).toBe(0);
  });
});
