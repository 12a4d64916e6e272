import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { constants, type PerformanceEntry, PerformanceObserver } from 'node:perf_hooks';
import { SlotSet } from '../common/slot-set.js';
import { median } from './lib/stats.js';

/**
 * `npm run bench:churned-set`: what a long-lived `Set` churned by requests costs the young
 * generation, against common/slot-set.ts (docs/adr/0056-no-hash-table-churned-by-requests.md).
 * Each variant runs in a process of its own, the two alternated three times: a container aged
 * into the old generation, then for 4 s a "request" (an object holding 200 small objects) added
 * per step and the ninth-oldest deleted, as a server keeps the requests in flight. Prints one
 * JSON line per run: steps per second, the scavenges' count, median, longest and total, and the
 * other collections' total, in ms.
 */

interface Member {
  payload: { i: number }[];
  slot: number;
}

const RUN_MS = 4000;
const IN_FLIGHT = 8;

async function churn(variant: 'set' | 'slot-set'): Promise<void> {
  const pauses: number[] = [];
  let majorMs = 0;
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
      if (kind === constants.NODE_PERFORMANCE_GC_MINOR) pauses.push(e.duration);
      else majorMs += e.duration;
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  const set = new Set<Member>();
  const slots = new SlotSet<'slot', Member>('slot');
  // Allocation enough for a few young collections: both containers reach the old generation.
  for (let i = 0; i < 20; i++) {
    new Array(100_000).fill({});
    await new Promise((r) => setTimeout(r, 1));
  }
  pauses.length = 0;
  majorMs = 0;
  let steps = 0;
  const inFlight: Member[] = [];
  const end = performance.now() + RUN_MS;
  for (; performance.now() < end; steps++) {
    const m: Member = { payload: Array.from({ length: 200 }, (_, i) => ({ i })), slot: -1 };
    if (variant === 'set') set.add(m);
    else slots.add(m);
    inFlight.push(m);
    if (inFlight.length > IN_FLIGHT) {
      const done = inFlight.shift() as Member;
      if (variant === 'set') set.delete(done);
      else slots.delete(done);
    }
    if (steps % 1000 === 999) await new Promise((r) => setImmediate(r));
  }
  await new Promise((r) => setImmediate(r));
  observer.disconnect();
  const total = pauses.reduce((a, b) => a + b, 0);
  const ms = (x: number): number => +x.toFixed(2);
  process.stdout.write(
    `${JSON.stringify({ variant, stepsPerSecond: Math.round(steps / (RUN_MS / 1000)), scavenges: pauses.length, medianMs: ms(median(pauses)), longestMs: ms(Math.max(0, ...pauses)), totalMs: ms(total), otherGcMs: ms(majorMs) })}\n`,
  );
}

const variant = process.argv[2];
if (variant === 'set' || variant === 'slot-set') await churn(variant);
else {
  const self = fileURLToPath(import.meta.url);
  for (let round = 0; round < 3; round++) {
    for (const v of ['set', 'slot-set']) {
      await new Promise<void>((resolve, reject) => {
        const child = fork(self, [v], { stdio: 'inherit' });
        child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`bench:churned-set ${v} exited ${String(code)}`))));
      });
    }
  }
}
