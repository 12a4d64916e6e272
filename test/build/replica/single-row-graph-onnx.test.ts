import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SAMPLE_WINE, wineForward, wineModelBytes, wineWeights } from '../../../common/wine-model.js';
import { runNodeScript } from '../../helpers/node-script.js';

// The build tier: the sessions come from dist/replica/onnx/graph-sessions.js, in a Node process of
// its own (onnxruntime-node cannot run inside jest's VM context). The pure rewrite is in test/unit.
describe('a shared graph with a single-row variant, in onnxruntime', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'modelmux-single-row-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('answers one row and batches as the model does, and reports the variant at open', async () => {
    const hidden = 3000;
    const rows = [SAMPLE_WINE, SAMPLE_WINE.map((v) => v * 1.1), SAMPLE_WINE.map((v) => v * 0.9)];
    const paths = ['a', 'b'].map((id) => join(dir, `${id}.onnx`));
    await Promise.all(['a', 'b'].map((id, i) => writeFile(paths[i] as string, wineModelBytes(id, hidden))));
    const got = await runNodeScript<{ singleRow: boolean[]; one: number[][]; batch: number[][] }>(`
      import { GraphSessions } from './dist/replica/onnx/graph-sessions.js';
      const singleRow = [];
      const sessions = new GraphSessions('cpu', { graphOptimization: 'basic', prepackWeights: false, shareGraphs: true, intraOpThreads: 1, interOpThreads: 1 }, (kind, weights, s) => singleRow.push(s === true));
      const rows = ${JSON.stringify(rows)};
      const one = [], batch = [];
      for (const path of ${JSON.stringify(paths)}) {
        const m = await sessions.open(path);
        const outs = [];
        for (const row of rows) outs.push((await m.run([{ datatype: 'FP32', dims: [1, 11], data: Float32Array.from(row) }]))[0].data[0]);
        one.push(outs);
        batch.push(Array.from((await m.run([{ datatype: 'FP32', dims: [3, 11], data: Float32Array.from(rows.flat()) }]))[0].data));
        await m.release();
      }
      console.log(JSON.stringify({ singleRow, one, batch }));
    `);
    expect(got.singleRow).toEqual([true, true]);
    ['a', 'b'].forEach((id, i) => {
      const expected = wineForward(wineWeights(id, hidden), rows);
      for (const [r, want] of expected.entries()) {
        expect(got.one[i]?.[r]).toBeCloseTo(want, 4);
        expect(got.batch[i]?.[r]).toBeCloseTo(want, 4);
      }
    });
    // Each model its own answers: the variant is fed that model's weights, not the first one's.
    expect(got.one[0]?.[0]).not.toBeCloseTo(got.one[1]?.[0] as number, 3);
  });
});
