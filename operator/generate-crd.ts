import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { CRDS } from '../common/crd.js';
import { crdYamlFrom } from '../common/crd-generator.js';

// Writes every CRD generated from its zod schemas into crds/ (run from the repository root: `npm run crds`).
for (const def of CRDS) {
  const target = resolve(process.argv[2] ?? '.', def.file);
  writeFileSync(target, crdYamlFrom(def));
  process.stdout.write(`wrote ${target}\n`);
}
