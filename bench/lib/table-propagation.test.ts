import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { propagation } from './table-propagation.js';

// Not a test tier: `npm run bench:check` runs the bench self-checks (node --test), `npm test` does not.

describe('the time from a table change to both routers', () => {
  it('takes, per load in the window, the later of the two routers to hold that version or a newer one', () => {
    const changes = {
      p: [
        [3, 1000],
        [6, 1500],
        [9, 5000],
      ] as [number, number][],
    };
    // Router one sees version 6 at 1800 (covering 3 and 6), router two sees 3 at 1100 and 7 at 2600.
    const seen = [
      { p: [[6, 1800]] as [number, number][] },
      {
        p: [
          [3, 1100],
          [7, 2600],
        ] as [number, number][],
      },
    ];
    assert.deepEqual(propagation(changes, seen, 0, 4000), { samples: [800, 1100], unseen: 0 });
  });

  it('counts a load no router reached as unseen, and leaves out loads outside the window', () => {
    const changes = {
      p: [
        [3, 1000],
        [6, 3000],
      ] as [number, number][],
      q: [[1, 500]] as [number, number][],
    };
    const seen = [{ p: [[3, 1200]] as [number, number][], q: [[1, 600]] as [number, number][] }, { p: [[4, 1300]] as [number, number][] }];
    assert.deepEqual(propagation(changes, seen, 900, 4000), { samples: [300], unseen: 1 });
  });
});
