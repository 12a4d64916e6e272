import { eventually, type CheckResult } from '../../harness/eventually.js';

describe('eventually', () => {
  it('retries a check until it stops throwing, and returns its value', async () => {
    let calls = 0;
    const value = await eventually(
      () => {
        calls += 1;
        expect(calls).toBe(3);
        return `after ${calls}`;
      },
      5000,
      1,
    );
    expect([value, calls]).toEqual(['after 3', 3]);
  });

  it("fails with the last assertion's own message when the time is up", async () => {
    let calls = 0;
    const waited = eventually(
      () => {
        calls += 1;
        expect(`try ${calls}`).toBe('never');
      },
      30,
      5,
    );
    await expect(waited).rejects.toThrow(/Expected: "never"\s+Received: "try \d+"/);
    expect(calls).toBeGreaterThan(1);
  });

  it('refuses a check that answers with a boolean instead of waiting on nothing', async () => {
    let calls = 0;
    // The old contract, `() => condition`, forced past the type checker as a caller in plain
    // JavaScript or behind a cast would.
    const check = (() => {
      calls += 1;
      return false;
    }) as unknown as () => CheckResult;
    await expect(eventually(check, 5000, 1)).rejects.toThrow(/returned a boolean/);
    expect(calls).toBe(1);
  });
});
