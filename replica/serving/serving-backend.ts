import type { ModelId } from '../../common/model-id.js';
import type { ModelTable } from '../../common/model-table.js';
import type { InferResponse } from '../../common/inference-body.js';

export interface InferOutcome {
  body: InferResponse;
  hit: boolean;
}

/**
 * What the replica's HTTP API serves from: the built-in onnxruntime engine (ReplicaService) or a
 * serving runtime beside the replica (SidecarService, docs/sidecar.md).
 */
export interface ServingBackend {
  readonly cache: { readonly version: number; has(id: string): boolean; evict(id: string): void };
  table(): ModelTable;
  infer(id: ModelId, body: unknown, binary: Uint8Array, holdMs?: number): Promise<InferOutcome>;
  /** The metadata body of `GET /v2/models/<id>`. */
  metadata(id: ModelId): Promise<{ body: unknown; hit: boolean }>;
  /** False while the replica cannot serve (sidecar mode: its runtime is not ready). */
  ready(): boolean;
  close(): Promise<void>;
}
