import { readFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import { MODEL_ROUTE_CRD, MULTIPLEXED_DEPLOYMENT_CRD } from '../../../common/crd.js';
import { buildCrdFrom, type CrdDefinition, type JsonSchema } from '../../../common/crd-generator.js';
import { multiplexedDeploymentSpecSchema } from '../../../common/resource.js';
import { markdownTables } from './markdown-tables.js';

// The field tables of the resources are prose (what a field means, what it costs) around facts
// the schema holds (type, bounds, required, default): the facts are checked against the CRD
// generated from the schema, which is what the API server enforces.

const REFERENCES: readonly { page: string; crd: CrdDefinition; root: string }[] = [
  { page: 'docs/resource.md', crd: MULTIPLEXED_DEPLOYMENT_CRD, root: 'spec' },
  { page: 'docs/sidecar.md', crd: MULTIPLEXED_DEPLOYMENT_CRD, root: 'spec.runtime' },
  { page: 'docs/routes.md', crd: MODEL_ROUTE_CRD, root: 'spec' },
];

const isObject = (v: unknown): v is JsonSchema => typeof v === 'object' && v !== null && !Array.isArray(v);

function specSchema(crd: CrdDefinition): JsonSchema {
  const version = (buildCrdFrom(crd)['spec'] as JsonSchema)['versions'] as JsonSchema[];
  const open = (version[0]?.['schema'] as JsonSchema)['openAPIV3Schema'] as JsonSchema;
  return (open['properties'] as JsonSchema)['spec'] as JsonSchema;
}

/** The schema of `spec.a.b[]` (`[]`: the array's items), with the object that holds it. */
function resolve(spec: JsonSchema, path: string): { schema: JsonSchema; parent: JsonSchema; name: string } | undefined {
  let schema = spec;
  let parent = spec;
  let name = 'spec';
  for (const part of path.split('.').slice(1)) {
    const [key = '', ...brackets] = part.split('[]');
    const next = (schema['properties'] as JsonSchema | undefined)?.[key];
    if (!isObject(next)) return undefined;
    parent = schema;
    name = key;
    schema = next;
    for (let i = 0; i < brackets.length; i++) if (isObject(schema['items'])) schema = schema['items'];
  }
  return { schema, parent, name };
}

/** The fields a row's first cell names: `spec.a.b`, and `.c` for a sibling of the first. */
function rowFields(cell: string): string[] {
  const names = [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? '');
  const first = names[0] ?? '';
  return names.map((n) => (n.startsWith('.') ? first.slice(0, first.lastIndexOf('.')) + n : n));
}

/** A default as the table writes it: one backticked literal, or anything else (none, prose, another field). */
function statedDefault(cell: string): unknown {
  const m = /^`([^`]+)`$/.exec(cell);
  if (m === null || /^(--|[a-z]+\.[a-zA-Z.]+$)/.test(m[1] ?? '')) return undefined;
  try {
    return JSON.parse(m[1] ?? '') as unknown;
  } catch {
    return m[1];
  }
}

/** What the type cell says that the schema can confirm; words it cannot check (`URL`, `model id`) say nothing. */
function typeProblems(cell: string, schema: JsonSchema, parent: JsonSchema, name: string): string[] {
  const problems: string[] = [];
  const range = /^(integer|number)(?: (\d+)–(\d+))?/.exec(cell);
  if (range) {
    if (schema['type'] !== range[1]) problems.push(`type ${String(schema['type'])}`);
    if (range[2] !== undefined && (schema['minimum'] !== Number(range[2]) || schema['maximum'] !== Number(range[3]))) problems.push(`bounds ${String(schema['minimum'])}–${String(schema['maximum'])}`);
  }
  const word = /^(boolean|string|object)(?=,|$)/.exec(cell)?.[1];
  if (word !== undefined && schema['type'] !== word) problems.push(`type ${String(schema['type'])}`);
  if (/^quantity$/.test(cell) && schema['x-kubernetes-int-or-string'] !== true) problems.push('not a quantity');
  const choices = cell.split(' | ');
  if (choices.length > 1 && choices.every((c) => /^`[^`]+`$/.test(c))) {
    const documented = choices.map((c) => c.slice(1, -1)).sort();
    if (JSON.stringify(documented) !== JSON.stringify([...((schema['enum'] as string[] | undefined) ?? [])].sort())) problems.push(`values ${JSON.stringify(schema['enum'])}`);
  }
  const required = ((parent['required'] as string[] | undefined) ?? []).includes(name);
  if (/\brequired\b/.test(cell) !== required) problems.push(required ? 'required' : 'optional');
  return problems;
}

describe.each(REFERENCES)('the field table of $page', ({ page, crd, root }) => {
  let rows: string[][] = [];
  const spec = specSchema(crd);
  beforeAll(async () => {
    rows = markdownTables(await readFile(page, 'utf8'))
      .filter((t) => t.header.slice(0, 3).join('|') === 'Field|Type|Default')
      .flatMap((t) => t.rows);
  });

  it(`names only fields of ${crd.kind}, with the schema's type, bounds, required fields and default`, () => {
    expect(rows.length).toBeGreaterThan(2);
    const wrong: string[] = [];
    for (const [fieldCell = '', typeCell = '', defaultCell = ''] of rows) {
      for (const field of rowFields(fieldCell)) {
        const found = resolve(spec, field);
        if (found === undefined) {
          wrong.push(`${field}: no such field`);
          continue;
        }
        const problems = typeProblems(typeCell, found.schema, found.parent, found.name);
        if (statedDefault(defaultCell) !== undefined || found.schema['default'] !== undefined) {
          if (JSON.stringify(statedDefault(defaultCell)) !== JSON.stringify(found.schema['default'])) problems.push(`default ${JSON.stringify(found.schema['default'])}`);
        }
        if (problems.length > 0) wrong.push(`${field}: the schema says ${problems.join(', ')}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it(`gives every field under ${root} a row, or names it in the row of the object that holds it`, () => {
    const documented = new Map(rows.flatMap((row) => rowFields(row[0] ?? '').map((f) => [f, row.join(' ')] as const)));
    const missing: string[] = [];
    const walk = (path: string, schema: JsonSchema): void => {
      const children = isObject(schema['properties']) ? schema['properties'] : isObject(schema['items']) && isObject(schema['items']['properties']) ? schema['items']['properties'] : undefined;
      if (children === undefined) return;
      const base = isObject(schema['items']) && !isObject(schema['properties']) && !path.endsWith('[]') ? `${path}[]` : path;
      for (const [name, child] of Object.entries(children)) {
        if (!isObject(child)) continue;
        const childPath = `${base}.${name}`;
        if (documented.has(childPath) || documented.has(`${childPath}[]`)) walk(documented.has(childPath) ? childPath : `${childPath}[]`, child);
        else if (documented.has(path) || documented.has(base)) {
          if (!new RegExp(`\\b${name}\\b`).test(documented.get(path) ?? documented.get(base) ?? '')) missing.push(childPath);
        } else if (isObject(child['properties']) || isObject(child['items'])) walk(childPath, child);
        else missing.push(childPath);
      }
    };
    walk(root, resolve(spec, root)?.schema ?? {});
    expect(missing).toEqual([]);
  });
});

describe("README's MultiplexedDeployment", () => {
  it('is a spec the schema accepts', async () => {
    const readme = await readFile('README.md', 'utf8');
    const yaml = /## The MultiplexedDeployment resource\n[\s\S]*?```yaml\n([\s\S]*?)```/.exec(readme)?.[1];
    const doc = parseAllDocuments(yaml ?? '')[0]?.toJS() as { kind?: string; spec?: unknown } | undefined;
    expect(doc?.kind).toBe(MULTIPLEXED_DEPLOYMENT_CRD.kind);
    const parsed = multiplexedDeploymentSpecSchema.safeParse(doc?.spec);
    expect(parsed.success ? [] : parsed.error.issues).toEqual([]);
  });
});
