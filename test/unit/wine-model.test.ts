import { wineModelBytes } from '../../common/wine-model.js';

describe('the example wine models', () => {
  it('are the same bytes for the same id and differ between ids', () => {
    expect(Buffer.from(wineModelBytes('7')).equals(Buffer.from(wineModelBytes('7')))).toBe(true);
    expect(Buffer.from(wineModelBytes('7')).equals(Buffer.from(wineModelBytes('8')))).toBe(false);
  });

  it('grow with the size knob', () => {
    expect(wineModelBytes('7', 20_000).length).toBeGreaterThan(1_000_000);
  });
});
