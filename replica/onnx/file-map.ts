import { existsSync } from 'node:fs';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { alignWeights } from './aligned-weights.js';

/**
 * Model files mapped into memory (native/file-map.cc): a mapped model's weights are viewed in the
 * kernel's page cache instead of copied into a buffer on every load
 * (docs/adr/0021-mapped-weights.md).
 */
export interface FileMapper {
  /** The whole file as an ArrayBuffer; throws (code ENOENT or EMAP) when it cannot be mapped. */
  map(path: string): ArrayBuffer;
  /**
   * Gives back a buffer from `map`; views of it must not be used from then on. The native mapper
   * unmaps it, and its views read as empty; IdleMappings keeps the mapping for the file's next
   * load. Idempotent.
   */
  unmap(buffer: ArrayBuffer): void;
}

// Built into dist/native by native/build.js; this module runs from dist/replica/onnx (the programs)
// or from replica/onnx/ (jest, on the sources).
const CANDIDATES = ['../../native/file-map.node', '../../dist/native/file-map.node'];

/** The mapper, or why there is none: not built on this machine (no C++ compiler, or no Node-API headers: devDependencies) or not loadable. */
export function loadFileMapper(): FileMapper | { unavailable: string } {
  const path = CANDIDATES.map((c) => fileURLToPath(new URL(c, import.meta.url))).find((p) => existsSync(p));
  if (path === undefined) return { unavailable: 'dist/native/file-map.node was not built (npm run build needs a C++ compiler and the devDependencies node-api-headers and node-addon-api)' };
  try {
    return createRequire(import.meta.url)(path) as FileMapper;
  } catch (err) {
    return { unavailable: `dist/native/file-map.node cannot be loaded: ${err instanceof Error ? err.message : String(err)}` };
  }
}

/**
 * Rewrites a model file the replica owns so that its weights can be mapped in place
 * (aligned-weights.ts); answers its new size, or undefined when it was left as it was (nothing
 * to align, the padding would take it past `maxBytes`, or the rewrite failed: the file is then
 * read at each load, as without a mapper).
 */
export async function alignFileWeights(path: string, maxBytes?: number): Promise<number | undefined> {
  const tmp = `${path}.aligned`;
  try {
    const aligned = alignWeights(await readFile(path));
    if (!aligned || (maxBytes !== undefined && aligned.length > maxBytes)) return undefined;
    await writeFile(tmp, aligned, { mode: 0o600 });
    await rename(tmp, path);
    return aligned.length;
  } catch {
    // Alignment only makes loads cheaper: never the reason a download fails (a full disk, say).
    await rm(tmp, { force: true });
    return undefined;
  }
}
