import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadPackageDefinition, type GrpcObject, type ServiceClientConstructor, type ServiceDefinition } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import { ModelmuxError } from '../errors.js';
import { scanRequest, type ScannedMethod } from './message-scan.js';

/**
 * The Open Inference Protocol's gRPC service (`inference.GRPCInferenceService`), loaded from the
 * published .proto at run time: one definition for the replica's server, the router's server and
 * client, and the tests' clients.
 */

export const PROTO_FILE = 'grpc_predict_v2.proto';
export const SERVICE_NAME = 'inference.GRPCInferenceService';

// The .proto is not compiled: tsc emits only .js. This module runs from common/grpc (jest, on the
// sources) or dist/common/grpc (the programs, which find it at the package root's common/grpc;
// the Dockerfile copies it there).
const CANDIDATES = [`./${PROTO_FILE}`, `../../../common/grpc/${PROTO_FILE}`];

export function protoPath(): string {
  const path = CANDIDATES.map((c) => fileURLToPath(new URL(c, import.meta.url))).find((p) => existsSync(p));
  if (path === undefined) throw new Error(`common/grpc/${PROTO_FILE} is missing beside the program (looked in ${CANDIDATES.join(', ')})`);
  return path;
}

/**
 * keepCase: fields by their .proto names (model_name, raw_input_contents), as every V2 document
 * spells them. longs as decimal strings: int64/uint64 (shapes, INT64/UINT64 contents) stay exact
 * past 2^53 and convert to bigint losslessly. defaults: absent repeated fields read as [] and
 * absent strings as '', so handlers need no undefined checks; oneofs names the parameter's kind.
 */
const LOAD_OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true } as const;

let loaded: { service: ServiceDefinition; Client: ServiceClientConstructor } | undefined;

function load(): { service: ServiceDefinition; Client: ServiceClientConstructor } {
  if (loaded !== undefined) return loaded;
  const pkg = loadPackageDefinition(loadSync(protoPath(), LOAD_OPTIONS));
  const Client = (pkg['inference'] as GrpcObject)['GRPCInferenceService'] as ServiceClientConstructor;
  loaded = { service: Client.service, Client };
  return loaded;
}

/** The service definition for `Server.addService`. */
export function inferenceServiceDefinition(): ServiceDefinition {
  return load().service;
}

/** The generic client class: `new (inferenceClient())(address, credentials, options)`. */
export function inferenceClient(): ServiceClientConstructor {
  return load().Client;
}

/** The service's methods, all unary. */
export type InferenceMethod = ScannedMethod;

/**
 * A request message of `method` decoded as grpc-js's server would (the load options above), once
 * message-scan.ts has checked it: the walk bounds what the decode builds, and refuses whatever
 * the decode would throw on, as `invalid_request` (INVALID_ARGUMENT), never an internal error.
 */
export function decodeRequest<T>(method: InferenceMethod, bytes: Buffer): T {
  scanRequest(method, bytes);
  const def = inferenceServiceDefinition()[method];
  if (def === undefined) throw new Error(`the inference service has no ${method}`);
  try {
    return def.requestDeserialize(bytes) as T;
  } catch (err) {
    throw new ModelmuxError('invalid_request', `the ${method} request cannot be decoded: ${err instanceof Error ? err.message : String(err)}`);
  }
}

let responseTypes: Map<InferenceMethod, protobuf.Type> | undefined;

/** Each method's answer type, from the same .proto with the same field names (keepCase). */
function responseType(method: InferenceMethod): protobuf.Type {
  if (responseTypes === undefined) {
    const root = new protobuf.Root().loadSync(protoPath(), { keepCase: true });
    responseTypes = new Map(Object.keys(inferenceServiceDefinition()).map((m) => [m as InferenceMethod, root.lookupType(`inference.${m}Response`)]));
  }
  const type = responseTypes.get(method);
  if (type === undefined) throw new Error(`the inference service has no ${method}`);
  return type;
}

/**
 * An answer of `method` as its message's bytes: protobufjs's encoder run on the value as it is,
 * not on a copy built by `fromObject` first (grpc-js's serializer): the answer's typed contents may
 * be the engine's typed arrays themselves, which the encoder reads element by element. The value
 * must be typed as the message is (our own answers are); the bytes are those grpc-js's serializer
 * writes (test/unit/replica/grpc-contents.test.ts compares them).
 */
export function encodeResponse<M extends InferenceMethod>(method: M, value: ResponseOf[M]): Buffer {
  const bytes = responseType(method).encode(value).finish();
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** An int64/uint64 as it is read (a decimal string) and may be written (string or number). */
export type Int64 = string;

/** InferParameter: one of the three kinds (`parameter_choice` names which is set). */
export interface InferParameter {
  bool_param?: boolean;
  int64_param?: Int64 | number;
  string_param?: string;
  parameter_choice?: 'bool_param' | 'int64_param' | 'string_param';
}

export interface InferTensorContents {
  bool_contents?: boolean[];
  int_contents?: number[];
  int64_contents?: (Int64 | number)[];
  uint_contents?: number[];
  uint64_contents?: (Int64 | number)[];
  fp32_contents?: number[];
  fp64_contents?: number[];
  bytes_contents?: Uint8Array[];
}

/** InferInputTensor and InferOutputTensor: the same fields (contents unset when raw contents are used). */
export interface InferInputTensor {
  name: string;
  datatype: string;
  shape: (Int64 | number)[];
  parameters?: Record<string, InferParameter>;
  contents?: InferTensorContents | null;
}
export type InferOutputTensor = InferInputTensor;

export interface ModelInferRequest {
  model_name: string;
  model_version?: string;
  id?: string;
  parameters?: Record<string, InferParameter>;
  inputs: InferInputTensor[];
  outputs?: { name: string; parameters?: Record<string, InferParameter> }[];
  raw_input_contents?: Uint8Array[];
}

/**
 * Typed contents as an answer writes them: a numeric field may hold the output's typed array
 * itself (encodeResponse writes it element by element, with no copy into an array first).
 */
export type AnswerContents = { [K in keyof InferTensorContents]?: InferTensorContents[K] | ArrayLike<number> };

/** ModelInferResponse as the replica and the router write it (read back, it is a ModelInferResponse). */
export interface ModelInferAnswer extends Omit<ModelInferResponse, 'outputs'> {
  outputs: (Omit<InferOutputTensor, 'contents'> & { contents?: AnswerContents })[];
}

export interface ModelInferResponse {
  model_name: string;
  model_version: string;
  id: string;
  parameters?: Record<string, InferParameter>;
  outputs: InferOutputTensor[];
  raw_output_contents: Uint8Array[];
}

export interface TensorMetadata {
  name: string;
  datatype: string;
  shape: (Int64 | number)[];
}

export interface ModelMetadataResponse {
  name: string;
  versions: string[];
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
}

export interface ServerMetadataResponse {
  name: string;
  version: string;
  extensions: string[];
}

/** Each method's answer as encodeResponse takes it: typed as the message is, since nothing coerces it. */
export interface ResponseOf {
  ServerLive: { live: boolean };
  ServerReady: { ready: boolean };
  ModelReady: { ready: boolean };
  ServerMetadata: ServerMetadataResponse;
  ModelMetadata: ModelMetadataResponse;
  ModelInfer: ModelInferAnswer;
}

/** The trailer that carries the modelmux error code (docs/errors.md) of a failed call. */
export const ERROR_CODE_TRAILER = 'x-modelmux-error-code';

/**
 * Methods of the service that neither the router nor the replicas serve, with the reason their
 * UNIMPLEMENTED answer gives, at once, from the call's headers (ADR 0049).
 */
export const UNSERVED_METHODS: ReadonlyMap<string, string> = new Map([
  [
    '/inference.GRPCInferenceService/ModelStreamInfer',
    'ModelStreamInfer (the streaming call) is not served: every model here answers exactly one response per request, so ModelInfer carries the same calls; see docs/grpc.md',
  ],
]);
