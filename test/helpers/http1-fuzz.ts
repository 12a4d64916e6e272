import * as fc from 'fast-check';

/**
 * What the router's two differential tests against llhttp share (http1-differential.test.ts for
 * the request reader, http1-response-differential.test.ts for the response parser): byte
 * mutations of a near-valid message, its split into writes, and a seeded run that names the
 * seed reproducing a failure. HTTP1_FUZZ_SEED and HTTP1_FUZZ_RUNS vary both.
 */

export const pick = <T>(...xs: T[]): fc.Arbitrary<T> => fc.constantFrom(...xs);

/** Bytes no plain message holds, put where a mutation lands. */
const oddByte = pick('\x00', '\r', '\n', ' ', '\t', '\x7f', '\x80', ':', ',', '\r\n');

type Mutation = { at: number; insert: string } | { at: number; remove: number };
const mutation: fc.Arbitrary<Mutation> = fc.oneof(fc.record({ at: fc.nat(), insert: oddByte }), fc.record({ at: fc.nat(), remove: fc.integer({ min: 1, max: 2 }) }));

/** Most messages stay as generated; one in five gets one or two odd bytes inserted or bytes removed. */
export const mutations: fc.Arbitrary<Mutation[]> = fc.oneof({ arbitrary: fc.constant([] as Mutation[]), weight: 4 }, { arbitrary: fc.array(mutation, { minLength: 1, maxLength: 2 }), weight: 1 });

export function mutate(text: string, ms: readonly Mutation[]): string {
  let out = text;
  for (const m of ms) {
    const at = out.length === 0 ? 0 : m.at % out.length;
    out = 'insert' in m ? out.slice(0, at) + m.insert + out.slice(at) : out.slice(0, at) + out.slice(at + m.remove);
  }
  return out;
}

/** Up to four places to split a message into writes. */
export const cuts: fc.Arbitrary<number[]> = fc.array(fc.nat(), { maxLength: 4 });

/** `text` (latin1) as the writes that `cutsAt` (from `cuts`) split it into. */
export function writesOf(text: string, cutsAt: readonly number[]): Buffer[] {
  const bytes = Buffer.from(text, 'latin1');
  const at = [...new Set(cutsAt.map((c) => c % Math.max(1, bytes.length)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const cut of [...at, bytes.length]) {
    if (cut > from) out.push(bytes.subarray(from, cut));
    from = Math.max(from, cut);
  }
  return out;
}

/**
 * Runs `property` for `runs` cases from `seed`, starting new cases until `timeLimitMs` (a machine
 * slower than CI's may not finish every case in time: those that ran must pass, and at least 50).
 * A failure names the seed that reproduces it.
 */
export async function checkSeeded<T>(property: fc.IAsyncProperty<[T]>, seed: number, runs: number, timeLimitMs: number): Promise<void> {
  const details = await fc.check(property, { seed, numRuns: runs, interruptAfterTimeLimit: timeLimitMs, markInterruptAsFailure: false, unbiased: true });
  if (details.failed) {
    const cause = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
    throw new Error(`HTTP1_FUZZ_SEED=${seed} reproduces this\n${fc.defaultReportMessage(details) ?? ''}\n${cause}`);
  }
  if (details.numRuns < Math.min(runs, 50)) throw new Error(`only ${details.numRuns} cases ran within ${timeLimitMs} ms`);
}
