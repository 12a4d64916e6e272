import { commaList } from '../../../bench/lib/comma-list.js';
import { globalLruMisses } from '../../../bench/lib/global-lru.js';
import { ConfigError } from '../../../common/config.js';
import { sumMetric } from '../../../bench/lib/prom-text.js';
import { mean, median, medianBy, percentile, rotated, summarize } from '../../../bench/lib/stats.js';
import { idSampler, modelIds } from '../../../bench/lib/traffic.js';
import { machineLine, type MachineInfo } from '../../../bench/lib/machine.js';
import { nginxConfig } from '../../../bench/lib/nginx.js';

describe('the ideal global LRU floor', () => {
  it('loads each model once while every model fits in the slots', () => {
    expect(globalLruMisses(['a', 'b', 'a', 'c', 'b', 'a'], 3)).toEqual({ requests: 6, misses: 3 });
  });

  it('evicts the least recently used model when the slots are full', () => {
    // a b a c: b is the oldest when c arrives; b then misses, a still hits.
    expect(globalLruMisses(['a', 'b', 'a', 'c', 'a', 'b'], 2)).toEqual({ requests: 6, misses: 4 });
  });

  it('does not count the warm-up requests but keeps what they loaded', () => {
    expect(globalLruMisses(['a', 'b', 'a', 'b', 'c'], 2, 2)).toEqual({ requests: 3, misses: 1 });
  });
});

describe('reading counters from Prometheus text', () => {
  const text = [
    '# HELP modelmux_replica_model_loads_total Model loads.',
    '# TYPE modelmux_replica_model_loads_total counter',
    'modelmux_replica_model_loads_total{result="success"} 7',
    'modelmux_replica_model_loads_total{result="failure"} 2',
    'modelmux_replica_model_loads_total_extra 100',
    'modelmux_replica_models_loaded 3',
  ].join('\n');

  it('sums the samples whose labels match', () => {
    expect(sumMetric(text, 'modelmux_replica_model_loads_total', { result: 'success' })).toBe(7);
    expect(sumMetric(text, 'modelmux_replica_model_loads_total')).toBe(9);
  });

  it('does not take a longer metric name for the one asked', () => {
    expect(sumMetric(text, 'modelmux_replica_models_loaded')).toBe(3);
  });
});

describe('latency summaries', () => {
  it('takes nearest-rank percentiles', () => {
    const samples = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(samples, 50)).toBe(50);
    expect(percentile(samples, 99)).toBe(99);
    expect(summarize([3, 1, 2]).p50Ms).toBe(2);
    expect(Number.isNaN(summarize([]).p99Ms)).toBe(true);
  });

  it('takes the median of odd and even counts in any order, and the mean', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([0.9, 1.1, 0.8, 1.0])).toBeCloseTo(0.95);
    expect(Number.isNaN(median([]))).toBe(true);
    expect(mean([3, 1, 2, 10])).toBe(4);
    expect(Number.isNaN(mean([]))).toBe(true);
  });
});

describe('the request mixes', () => {
  it('draws the same model sequence for the same pattern and seed', () => {
    const ids = modelIds(50);
    const a = idSampler('zipf', ids, 7);
    const b = idSampler('zipf', ids, 7);
    const seqA = Array.from({ length: 200 }, () => a());
    expect(Array.from({ length: 200 }, () => b())).toEqual(seqA);
    expect(new Set(seqA).size).toBeGreaterThan(5);
  });

  it('sends about 80% of one-hot traffic to one model (10000 draws, ±3%)', () => {
    const next = idSampler('one-hot', modelIds(100), 1);
    const counts = new Map<string, number>();
    for (let i = 0; i < 10_000; i++) {
      const id = next();
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    const top = Math.max(...counts.values());
    expect(top / 10_000).toBeGreaterThan(0.77);
    expect(top / 10_000).toBeLessThan(0.83);
  });
});

describe('the nginx configuration', () => {
  it('keeps the serve_multiplexed_model_id header, which nginx drops by default', () => {
    expect(nginxConfig('/tmp/x', 8080, '/wine', '127.0.0.1:9000', 1)).toContain('underscores_in_headers on;');
  });

  it('logs nothing and adds no header when plain, like the reference it is', () => {
    const conf = nginxConfig('/tmp/x', 8080, '/wine', '127.0.0.1:9000', 1);
    expect(conf).toContain('access_log off;');
    expect(conf).not.toContain('X-Request-Id');
  });

  it("does the router's per-request work when asked: a batched JSON log line, a request id both ways, X-Forwarded-For", () => {
    const conf = nginxConfig('/tmp/x', 8080, '/wine', '127.0.0.1:9000', 1, true);
    expect(conf).not.toContain('access_log off;');
    expect(conf).toContain('access_log /tmp/x/access.log modelmux buffer=64k flush=50ms;');
    expect(conf).toMatch(/log_format modelmux escape=json '\{"time":"\$time_iso8601".*"route":"\/wine".*"status":\$status.*\}';/);
    expect(conf).toContain('proxy_set_header X-Request-Id $request_id;');
    expect(conf).toContain('add_header X-Request-Id $request_id always;');
    expect(conf).toContain('proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;');
  });
});

describe('medianBy', () => {
  it('picks the item whose key is the median, the lower middle one of an even count', () => {
    const rounds = [{ round: 0, v: 30 }, { round: 1, v: 10 }, { round: 2, v: 20 }];
    expect(medianBy(rounds, (r) => r.v)).toEqual({ round: 2, v: 20 });
    expect(medianBy(rounds.slice(0, 2), (r) => r.v)).toEqual({ round: 1, v: 10 });
    expect(medianBy([{ v: 5 }], (r) => r.v)).toEqual({ v: 5 });
    expect(medianBy([], (r: { v: number }) => r.v)).toBeUndefined();
  });
});

describe('rotated', () => {
  it('starts each round one item later, so every item takes every place once', () => {
    const items = ['uniform', 'one-hot', 'zipf'];
    expect([0, 1, 2, 3].map((r) => rotated(items, r))).toEqual([
      ['uniform', 'one-hot', 'zipf'],
      ['one-hot', 'zipf', 'uniform'],
      ['zipf', 'uniform', 'one-hot'],
      ['uniform', 'one-hot', 'zipf'],
    ]);
    expect(items).toEqual(['uniform', 'one-hot', 'zipf']);
    expect(rotated([], 2)).toEqual([]);
  });
});

describe('the Machine line', () => {
  const machine: MachineInfo = {
    date: '2026-12-03T07:46:54.540Z',
    nproc: 2,
    memoryGiB: 23.5,
    cpuModel: 'AMD EPYC',
    node: 'v20.20.2',
    kernel: '6.18',
    gitCommit: '8c1b4d7',
    uncommitted: [],
    loadAverage1m: 1,
  };

  it('names the commit alone when the run measured exactly it', () => {
    expect(machineLine(machine)).toContain('· commit 8c1b4d7 · load average 1 at start');
  });

  it('names the changed files when the run measured more than the commit, the first five of them', () => {
    const changed = ['router/a.ts', 'router/b.ts', 'replica/c.ts', 'd.ts', 'e.ts', 'f.ts', 'g.ts'];
    expect(machineLine({ ...machine, uncommitted: changed.slice(0, 1) })).toContain('commit 8c1b4d7 plus uncommitted changes to router/a.ts ·');
    expect(machineLine({ ...machine, uncommitted: changed })).toContain('plus uncommitted changes to router/a.ts, router/b.ts, replica/c.ts, d.ts, e.ts and 2 more ·');
  });

  it('says so when git could not tell', () => {
    expect(machineLine({ ...machine, uncommitted: undefined })).toContain('commit 8c1b4d7 (working tree unknown)');
  });
});

describe('comma lists of known names (--patterns, --systems)', () => {
  const known = ['uniform', 'one-hot', 'zipf'] as const;

  it('keeps the order given and ignores spaces and empty items', () => {
    expect(commaList('bench x', ' zipf, uniform ,,', known, 'pattern')).toEqual(['zipf', 'uniform']);
  });

  it('refuses an unknown name or a repeat with the command, the name and what is known', () => {
    expect(() => commaList('bench x', 'uniform,bogus', known, 'pattern')).toThrow(ConfigError);
    expect(() => commaList('bench x', 'uniform,bogus', known, 'pattern')).toThrow(/^modelmux bench x: .*\n.*unknown pattern: bogus \(known: uniform, one-hot, zipf\)/);
    expect(() => commaList('bench x', 'zipf,uniform,zipf', known, 'pattern')).toThrow(/pattern listed more than once: zipf/);
  });
});
