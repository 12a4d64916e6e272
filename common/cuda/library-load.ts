import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { LibraryCheck } from './provider-report.js';

const SHARED_LIBRARY = /\.so(\.\d+)*$/;
/** Node's words for a library that loaded but is no Node addon: what a plain library does. */
const LOADED = /did not self-register/;
const MISSING = /^(\S+): cannot open shared object file/;

/** What a dlopen error says about a library: loaded, or the dependency it could not find. Pure. */
export function classifyLoad(file: string, error: string | undefined): LibraryCheck {
  if (error === undefined || LOADED.test(error)) return { file, loaded: true };
  const missing = MISSING.exec(error)?.[1];
  return missing !== undefined ? { file, loaded: false, missing, error } : { file, loaded: false, error };
}

/**
 * Loads each shared library of `folder` as the replica's process would, through the loader and
 * the library path this process started with (process.dlopen: a plain library loads, then is
 * refused as no addon). The loader names only the first dependency it misses.
 */
export function checkLibraries(folder: string): LibraryCheck[] {
  let files: string[];
  try {
    files = readdirSync(folder).filter((f) => SHARED_LIBRARY.test(f));
  } catch {
    return [];
  }
  return files.sort().map((file) => {
    try {
      process.dlopen({ exports: {} }, join(folder, file));
      return classifyLoad(file, undefined);
    } catch (err) {
      return classifyLoad(file, err instanceof Error ? err.message : String(err));
    }
  });
}
