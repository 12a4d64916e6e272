import protobuf from 'protobufjs';

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
