import { readFile, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { GENERATED_DOCS } from './docs/generated-docs.js';

// Writes every generated page, or part of a page, under docs/ (run from the repository root: `npm run docs`).
for (const doc of GENERATED_DOCS) {
  const target = resolve(doc.file);
  const current = await readFile(target, 'utf8');
  const next = await doc.render(current);
  if (next === current) continue;
  await writeFile(target, next);
  process.stdout.write(`wrote ${target}\n`);
}
