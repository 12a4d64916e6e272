import protobuf from 'protobufjs';
import { splitModelId } from '../common/model-version.js';

/**
 * The head of a ModelInferRequest, ModelMetadataRequest or ModelReadyRequest: the three share
 * field 1 (model_name / name) and field 2 (model_version / version); ModelInferRequest's field
 * 3 is its id. Only these are decoded: protobufjs skips every other field by its length (the
 * tensors, which the router forwards as the bytes it received and never re-encodes).
 */
export interface GrpcHead {
  name: string;
  version: string;
  id: string;
}

const HEAD = new protobuf.Type('ModelHead').add(new protobuf.Field('name', 1, 'string')).add(new protobuf.Field('version', 2, 'string')).add(new protobuf.Field('id', 3, 'string'));

/** The head, or undefined when the bytes are not a protobuf message. */
export function decodeGrpcHead(bytes: Uint8Array): GrpcHead | undefined {
  try {
    // A plain Uint8Array view: protobufjs reads a Buffer leniently (a string cut short is taken
    // as far as it goes), a Uint8Array strictly (a cut message is refused).
    const m = HEAD.decode(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)) as unknown as Partial<GrpcHead>;
    return { name: m.name ?? '', version: m.version ?? '', id: m.id ?? '' };
  } catch {
    return undefined;
  }
}

/**
 * `raw` sent to `model` (`id` or `id@v`) in place of the model it names: `model_name` and
 * `model_version` (empty for an unversioned model, so no version of the message's is left) are
 * appended, re-encoded. A protobuf parser keeps the last value of a non-repeated scalar field,
 * so the replica reads the new name and version and every other field as the bytes received.
 */
export function addressedTo(raw: Buffer, model: string): Buffer {
  const { base, version } = splitModelId(model);
  // protobufjs writes a field that is set even when it holds the default (an empty version).
  const tail = HEAD.encode({ name: base, version: version ?? '' }).finish();
  return Buffer.concat([raw, tail], raw.length + tail.length);
}

/** A request message as the router's gRPC server receives it: its head and all of its bytes. */
export interface ForwardedMessage {
  raw: Buffer;
  head: GrpcHead | undefined;
}

/** The deserializer of a forwarded call: never throws, so a bad message is answered by the router (INVALID_ARGUMENT). */
export function readForwarded(raw: Buffer): ForwardedMessage {
  return { raw, head: decodeGrpcHead(raw) };
}

/** The (de)serializer of bytes the router forwards as they are. */
export const passThrough = (bytes: Buffer): Buffer => bytes;
