import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkLocalRoutes } from '../../../cli/local-routes.js';
import { ConfigError } from '../../../common/config.js';
import { parseRoutesYaml, readRoutesFile } from '../../../router/routes/route-file.js';

const doc = (name: string, pool: string, weight = 1) => `apiVersion: modelmux.io/v1alpha1
kind: ModelRoute
metadata:
  name: ${name}
spec:
  deploymentRef: { name: ${pool} }
  split:
    backends: [{ model: m, weight: ${weight} }]
`;

describe('parseRoutesYaml', () => {
  it('reads several ModelRoutes, grouped by the pool they name', () => {
    const { routes, problems } = parseRoutesYaml(['', doc('a', 'wine'), doc('b', 'beer'), doc('c', 'wine')].join('---\n'));
    expect(problems).toEqual([]);
    expect([...routes].map(([pool, rs]) => [pool, rs.map((r) => r.metadata.name)])).toEqual([
      ['wine', ['a', 'c']],
      ['beer', ['b']],
    ]);
  });

  it('reports every bad document with its place and name, and a duplicate name', () => {
    const { problems } = parseRoutesYaml([doc('a', 'wine', 0), 'metadata: *undefined-alias\n', doc('b', 'wine'), doc('b', 'wine')].join('---\n'));
    expect(problems).toHaveLength(3);
    expect(problems[0]).toMatch(/^document 1 \(a\): spec.split.backends: backend weights must sum/);
    expect(problems[1]).toMatch(/^document 2: /);
    expect(problems[2]).toBe('document 4: a second ModelRoute named b');
  });
});

describe('a routes file at start', () => {
  const dir = mkdtempSync(join(tmpdir(), 'modelmux-routes-file-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, text: string): string => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  it('is a configuration error (exit code 2) naming the flag, the file and each problem', () => {
    const path = file('bad.yaml', [doc('a', 'wine'), doc('a', 'wine'), doc('c', 'wine', 0)].join('---\n'));
    const err = (() => {
      try {
        readRoutesFile(path, 'router', '--routes-file');
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems).toEqual([
      `--routes-file ${path}: document 2: a second ModelRoute named a`,
      `--routes-file ${path}: document 3 (c): spec.split.backends: backend weights must sum to more than 0`,
    ]);
    expect(() => readRoutesFile(join(dir, 'missing.yaml'), 'router', '--routes-file')).toThrow(ConfigError);
  });

  it('must name the local pool in modelmux local', () => {
    const path = file('pools.yaml', [doc('a', 'wine'), doc('b', 'beer')].join('---\n'));
    expect(() => checkLocalRoutes(path, 'beer')).toThrow(/ModelRoute a names pool wine; the local pool is beer/);
    expect(() => checkLocalRoutes(file('ok.yaml', doc('a', 'wine')), 'wine')).not.toThrow();
  });
});
