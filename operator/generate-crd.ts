import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { CRD_FILE, crdYaml } from '../common/crd.js';

// Writes the CRD generated from common/resource.ts into crds/ (run from the repository root: `npm run crds`).
const target = resolve(process.argv[2] ?? '.', CRD_FILE);
writeFileSync(target, crdYaml());
process.stdout.write(`wrote ${target}\n`);
