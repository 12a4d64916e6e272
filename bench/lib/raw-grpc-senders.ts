import { PREFIX_BYTES } from '../../common/grpc/grpc-frame.js';
import { inferenceServiceDefinition, type ModelInferResponse } from '../../common/grpc/inference-service.js';
import { SAMPLE_WINE, WINE_FEATURES, WINE_INPUT } from '../../common/wine-model.js';
import { FrameGrpcConnection } from '../../harness/frame-grpc-client.js';
import { framed, type RawAnswer, RawGrpcConnection } from '../../harness/raw-grpc-client.js';

/** Sends one request for `model` and resolves with its first output value (NaN where the answer is not decoded), or throws. */
export type Send = (model: string) => Promise<number>;

const modelInfer = (): { requestSerialize(v: unknown): Buffer; responseDeserialize(b: Buffer): unknown } =>
  inferenceServiceDefinition()['ModelInfer'] as { requestSerialize(v: unknown): Buffer; responseDeserialize(b: Buffer): unknown };

function firstValue(res: ModelInferResponse): number {
  const raw = res.raw_output_contents[0];
  if (raw !== undefined && raw.byteLength >= 4) return Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).readFloatLE(0);
  return res.outputs[0]?.contents?.fp32_contents?.[0] ?? Number.NaN;
}

/** Each model's ModelInfer request of `rows` sample rows, encoded and length-prefixed: a gRPC call's whole body. */
export function inferMessages(ids: readonly string[], rows: number): Map<string, Buffer> {
  const infer = modelInfer();
  const data = Array.from({ length: rows }, () => SAMPLE_WINE).flat();
  return new Map(
    ids.map((id) => [id, framed(infer.requestSerialize({ model_name: id, inputs: [{ name: WINE_INPUT, datatype: 'FP32', shape: [rows, WINE_FEATURES], contents: { fp32_contents: data } }] }))]),
  );
}

/** Which lean client: the project's own HTTP/2 framing (`frames`), or node:http2's client session (`node-http2`). */
export type RawGrpcClient = 'frames' | 'node-http2';

/** One client's connection, whichever kind. */
interface Caller {
  readonly usable: boolean;
  infer(message: Buffer): Promise<RawAnswer>;
  close(): void;
}

async function openCaller(kind: RawGrpcClient, address: string): Promise<Caller> {
  if (kind === 'frames') {
    const c = await FrameGrpcConnection.open(address);
    return {
      get usable() {
        return c.usable;
      },
      infer: (m) => c.call('ModelInfer', m),
      close: () => c.close(),
    };
  }
  const c = await RawGrpcConnection.open(address);
  return {
    get usable() {
      return !c.session.closed && !c.session.destroyed && c.goawayCode === undefined;
    },
    infer: (m) => c.call('ModelInfer', m).answer,
    close: () => c.close(),
  };
}

/**
 * bench:grpc's lean gRPC clients, the counterpart of its HTTP clients (one undici keep-alive
 * connection each, one JSON body built up front): one HTTP/2 connection per client and each
 * model's ModelInfer message encoded and framed once. `frames` (harness/frame-grpc-client.ts)
 * keeps a call as a few JS objects, as undici does; node:http2's session (`node-http2`) makes a
 * native stream per call, whose long collection pauses held all the process's clients. An
 * answer counts when its grpc-status is 0 and its bytes are one length-prefixed message; each
 * client decodes its first answer as a ModelInferResponse, and `check` decodes every answer (the
 * bench compares its values with the reference forward pass). A client whose connection the
 * router has closed (idle past its keep-alive timeout during the other protocol's long windows, a
 * GOAWAY) opens a new one, as undici's and grpc-js's do. What grpc-js would add per call (Metadata,
 * call objects, decoding every answer into objects) would be the bench process's CPU competing
 * with the router's on the same cores.
 */
export async function rawGrpcSenders(kind: RawGrpcClient, address: string, concurrency: number, ids: readonly string[], rows: number): Promise<{ sends: Send[]; check: Send; close(): void }> {
  const infer = modelInfer();
  const messages = inferMessages(ids, rows);
  const connections = await Promise.all(Array.from({ length: concurrency }, () => openCaller(kind, address)));
  const call = async (i: number, model: string, decode: boolean): Promise<number> => {
    const message = messages.get(model);
    if (message === undefined) throw new Error(`no message encoded for ${model}`);
    let connection = connections[i] as Caller;
    if (!connection.usable) {
      connection.close();
      connection = connections[i] = await openCaller(kind, address);
    }
    const a = await connection.infer(message);
    if (a.grpcStatus !== 0) throw new Error(`gRPC status ${a.grpcStatus ?? 'none'} (${a.code ?? a.grpcMessage ?? `RST_STREAM ${a.rstCode ?? '?'}`})`);
    if (a.body.length < PREFIX_BYTES || a.body.readUInt32BE(1) !== a.body.length - PREFIX_BYTES) throw new Error(`the answer is not one gRPC message (${a.body.length} bytes)`);
    return decode ? firstValue(infer.responseDeserialize(a.body.subarray(PREFIX_BYTES)) as ModelInferResponse) : Number.NaN;
  };
  const sends = connections.map((_, i): Send => {
    let decoded = false;
    return async (model) => {
      const value = await call(i, model, !decoded);
      decoded = true;
      return value;
    };
  });
  return { sends, check: (model) => call(0, model, true), close: () => connections.forEach((c) => c.close()) };
}
