/**
 * Model versions (docs/adr/0033-model-versions.md). Version `v` of model `id` is the model
 * `id@v` everywhere inside modelmux: the replica's table, the router's placement, caches,
 * metrics and logs treat it as a model of its own. In the store it lives in the numeric folder
 * `<id>/<v>/` beside (below) the default version's `<id>/model.onnx`, as Triton and KServe
 * number theirs. This file states the rule; common/model-id.ts applies it to every id.
 */

/** Between a model's id and its version: `wine-7@2`. */
export const VERSION_SEPARATOR = '@';

/** A version is a folder name of 1 to 18 digits (fits a signed 64-bit integer, as Triton's do). */
const VERSION = /^[0-9]{1,18}$/;

export function isModelVersion(raw: string): boolean {
  return VERSION.test(raw);
}

/** A model id split into the id the store folder is named by and its version (undefined: the default one). */
export interface ModelName {
  base: string;
  version: string | undefined;
}

/** Why `raw`, an id holding the separator, is not `id@v`; undefined when it is. */
export function versionedIdProblem(raw: string): string | undefined {
  const at = raw.indexOf(VERSION_SEPARATOR);
  if (at === -1) return undefined;
  const base = raw.slice(0, at);
  const version = raw.slice(at + 1);
  if (base === '' || base === '.') return `model id "${raw}" names a version of no model: write <id>@<version>`;
  if (!isModelVersion(version)) return `"@" in a model id introduces a version of 1 to 18 digits (<id>@<version>), not "${version}"`;
  return undefined;
}

/** Splits a valid model id; `wine-7@2` → `{ base: 'wine-7', version: '2' }`, `wine-7` → `{ base: 'wine-7', version: undefined }`. */
export function splitModelId(id: string): ModelName {
  const at = id.indexOf(VERSION_SEPARATOR);
  return at === -1 ? { base: id, version: undefined } : { base: id.slice(0, at), version: id.slice(at + 1) };
}

/** The model id of `version` of `base` (`base` itself for the default version). */
export function joinModelId(base: string, version: string | undefined): string {
  return version === undefined ? base : `${base}${VERSION_SEPARATOR}${version}`;
}

const byText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Numeric order of two versions (equal numbers, `1` and `01`, by their text); a total order on any strings. */
export function compareVersions(a: string, b: string): number {
  const x = a.replace(/^0+(?=.)/, '');
  const y = b.replace(/^0+(?=.)/, '');
  return x.length - y.length || byText(x, y) || byText(a, b);
}

/** Versions in numeric order, as metadata lists them. */
export function sortVersions(versions: Iterable<string>): string[] {
  return [...versions].sort(compareVersions);
}
