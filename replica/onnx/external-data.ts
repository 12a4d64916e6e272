import { ModelmuxError } from '../../common/errors.js';
import { ProtoError, protoFields, ProtoWriter, WIRE_LEN } from '../../common/proto-wire.js';
import { GRAPH, MODEL, TENSOR, text } from './shared-graph.js';

/**
 * ONNX external data: an initializer whose bytes sit in a file beside `model.onnx` (commonly
 * `model.onnx.data`), named by a `location` relative to the model's folder. Models over 2 GB must
 * be stored so, and exporters often do it for smaller ones.
 */

const ENTRY = { key: 1, value: 2 };

/**
 * Why a `location` may not be followed, or undefined when it may: it must stay inside the
 * model's folder (relative, no `..`, no backslash or NUL that a filesystem could read otherwise).
 */
export function badLocation(location: string): string | undefined {
  if (location === '') return 'it is empty';
  if (location.startsWith('/') || /^[A-Za-z]:/.test(location)) return 'it is an absolute path';
  if (location.includes('\\') || location.includes('\0')) return 'it holds a backslash or NUL';
  if (location.split('/').some((part) => part === '..' || part === '')) return 'it leaves the model folder (a ".." or empty segment)';
  return undefined;
}

/**
 * The external data files a model's initializers name, each once, in order; throws with the
 * reason (`model_load_failed`) when a location may not be followed. An empty list for a model that holds its weights.
 * Initializers of the main graph only: onnxruntime's exporters put every external tensor there.
 * Bytes that are not a model answer an empty list: onnxruntime gives the real error.
 */
export function externalDataFiles(model: Uint8Array): string[] {
  try {
    return locations(model);
  } catch (err) {
    if (err instanceof ProtoError || err instanceof TypeError) return [];
    throw err;
  }
}

function locations(model: Uint8Array): string[] {
  const files = new Set<string>();
  for (const f of protoFields(model)) {
    if (f.field !== MODEL.graph || f.wire !== WIRE_LEN) continue;
    for (const g of protoFields(model, f.valueStart, f.valueEnd)) {
      if (g.field !== GRAPH.initializer || g.wire !== WIRE_LEN) continue;
      for (const t of protoFields(model, g.valueStart, g.valueEnd)) {
        if (t.field !== TENSOR.externalData || t.wire !== WIRE_LEN) continue;
        let key = '';
        let value = '';
        for (const e of protoFields(model, t.valueStart, t.valueEnd)) {
          if (e.field === ENTRY.key && e.wire === WIRE_LEN) key = text(model, e.valueStart, e.valueEnd);
          else if (e.field === ENTRY.value && e.wire === WIRE_LEN) value = text(model, e.valueStart, e.valueEnd);
        }
        if (key !== 'location') continue;
        const bad = badLocation(value);
        if (bad !== undefined) throw new ModelmuxError('model_load_failed', `external data location ${JSON.stringify(value.slice(0, 200))} is refused: ${bad}`);
        files.add(value);
      }
    }
  }
  return [...files];
}

/**
 * The model with every external data location under `folder/`: a downloaded model's files go to
 * a folder of that download's own, beside it, so two models' `model.onnx.data` never meet.
 * Everything else is copied byte for byte.
 */
export function relocateExternalData(model: Uint8Array, folder: string): Uint8Array {
  const out = new ProtoWriter();
  for (const f of protoFields(model)) {
    if (f.field !== MODEL.graph || f.wire !== WIRE_LEN) {
      out.raw(model.subarray(f.start, f.end));
      continue;
    }
    const graph = new ProtoWriter();
    for (const g of protoFields(model, f.valueStart, f.valueEnd)) {
      if (g.field !== GRAPH.initializer || g.wire !== WIRE_LEN) {
        graph.raw(model.subarray(g.start, g.end));
        continue;
      }
      const tensor = new ProtoWriter();
      for (const t of protoFields(model, g.valueStart, g.valueEnd)) {
        if (t.field !== TENSOR.externalData || t.wire !== WIRE_LEN) {
          tensor.raw(model.subarray(t.start, t.end));
          continue;
        }
        const entry = new ProtoWriter();
        let location = false;
        for (const e of protoFields(model, t.valueStart, t.valueEnd)) {
          if (e.field === ENTRY.key && e.wire === WIRE_LEN) location = text(model, e.valueStart, e.valueEnd) === 'location';
        }
        for (const e of protoFields(model, t.valueStart, t.valueEnd)) {
          if (location && e.field === ENTRY.value && e.wire === WIRE_LEN) entry.string(ENTRY.value, `${folder}/${text(model, e.valueStart, e.valueEnd)}`);
          else entry.raw(model.subarray(e.start, e.end));
        }
        tensor.bytes(TENSOR.externalData, entry.finish());
      }
      graph.bytes(GRAPH.initializer, tensor.finish());
    }
    out.bytes(MODEL.graph, graph.finish());
  }
  return out.finish();
}
