import { EnsembleTally, type QuorumDecision } from '../../../router/composite/ensemble-quorum.js';

const ok = { ok: true } as const;
const failed = (code: 'model_not_found' | 'input_mismatch' | 'upstream_unavailable', message = 'no'): { ok: false; code: typeof code; message: string } => ({ ok: false, code, message });

function summary(d: QuorumDecision): string {
  if (d.kind === 'wait') return 'wait';
  if (d.kind === 'answer') return `answer ${d.members.join(',')}`;
  return `fail ${d.error.code} ${d.error.status}: ${d.error.message}`;
}

describe('EnsembleTally', () => {
  const three = ['a', 'b', 'c'];

  it('waits for every member by default and answers with all, in member order', () => {
    const t = new EnsembleTally(three, 'mean', undefined);
    expect(t.quorum).toBe(3);
    expect(summary(t.settle(2, ok))).toBe('wait');
    expect(summary(t.settle(0, ok))).toBe('wait');
    expect(t.pending).toEqual([1]);
    expect(summary(t.settle(1, ok))).toBe('answer 0,1,2');
  });

  it('fails as soon as the quorum is out of reach, listing the members that failed', () => {
    const t = new EnsembleTally(three, 'median', 2);
    expect(summary(t.settle(0, failed('model_not_found', 'no model "a"')))).toBe('wait');
    expect(summary(t.settle(1, failed('upstream_unavailable', 'replica gone')))).toBe(
      'fail ensemble_quorum 502: 2 of 3 members failed, the quorum is 2; failed: a (model_not_found: no model "a"); b (upstream_unavailable: replica gone)',
    );
  });

  it('answers with those that succeeded once all ended, when they meet the quorum', () => {
    const t = new EnsembleTally(three, 'vote', 2);
    expect(summary(t.settle(1, ok))).toBe('wait');
    expect(summary(t.settle(0, failed('model_not_found')))).toBe('wait');
    expect(summary(t.settle(2, ok))).toBe('answer 1,2');
  });

  it('passes on a 400 that every failed member gave: the request is wrong, not the route', () => {
    const t = new EnsembleTally(three, 'mean', undefined);
    const d = t.settle(0, failed('input_mismatch', 'input "x" is missing'));
    expect(summary(d)).toMatch(/^fail input_mismatch 400: every failed member refused the request: 1 of 3 members failed/);
  });

  it('first answers with the first to succeed, whatever the member order', () => {
    const t = new EnsembleTally(three, 'first', undefined);
    expect(t.quorum).toBe(1);
    expect(summary(t.settle(0, failed('upstream_unavailable')))).toBe('wait');
    expect(summary(t.settle(2, ok))).toBe('answer 2');
    expect(t.pending).toEqual([1]);
  });

  it('first with a quorum waits for that many successes and answers with the earliest', () => {
    const t = new EnsembleTally(three, 'first', 2);
    expect(summary(t.settle(2, ok))).toBe('wait');
    expect(summary(t.settle(0, ok))).toBe('answer 2');
  });

  it('at the deadline answers with those that succeeded if enough, else ensemble_deadline naming the late ones', () => {
    const enough = new EnsembleTally(three, 'mean', 2);
    enough.settle(2, ok);
    enough.settle(0, ok);
    expect(summary(enough.expire('the ensemble deadline of 50 ms passed'))).toBe('answer 0,2');
    const short = new EnsembleTally(three, 'mean', 2);
    short.settle(1, ok);
    short.settle(0, failed('model_not_found', 'gone'));
    expect(summary(short.expire('the ensemble deadline of 50 ms passed'))).toBe(
      'fail ensemble_deadline 504: the ensemble deadline of 50 ms passed: 1 of 3 members answered, the quorum is 2; no answer from c; failed: a (model_not_found: gone)',
    );
  });

  it('ignores a second settlement of one member', () => {
    const t = new EnsembleTally(['a', 'b'], 'mean', undefined);
    t.settle(0, ok);
    expect(summary(t.settle(0, failed('model_not_found')))).toBe('wait');
    expect(summary(t.settle(1, ok))).toBe('answer 0,1');
  });
});
