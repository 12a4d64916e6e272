import protobuf from 'protobufjs';
import { ModelmuxError } from '../errors.js';
import { MAX_TENSOR_RANK } from '../tensor.js';

/**
 * The one rule of which request messages of `inference.GRPCInferenceService` are valid, router and
 * replica alike (ADR 0039): a walk of the message's wire form with protobufjs's Reader that
 * allocates nothing per field, checks every known field's wire type, and counts what a full
 * decode would build an object for, stopping at the first count past its bound. So a message of
 * two million empty `inputs` entries is refused after 65 of them, in microseconds, where a full
 * decode (proto-loader, defaults on) built every entry first: 0.7 GB and 2 s for 4 MiB. A message
 * this walk accepts decodes without error, and its decode costs at most a small multiple of its
 * bytes. Pure.
 */

/** Bounds of one request message; past one, `invalid_request` (INVALID_ARGUMENT). */
export const GRPC_MESSAGE_BOUNDS = {
  /** inputs, outputs and raw_input_contents entries each, as the V2 JSON body's schema (common/inference-body.ts). */
  tensors: 64,
  /** Entries of one parameters map (the request's, an input's or an output's). */
  parameters: 64,
  /**
   * bytes_contents elements of all inputs together: a decoded element costs about 250 bytes of
   * heap however short it is on the wire (2 bytes), so their count, not the message size, bounds
   * the decode. Larger BYTES tensors go in raw_input_contents (one entry per tensor).
   */
  bytesElements: 65_536,
} as const;

/** The fields the router places a call by: model_name / name, model_version / version, and ModelInfer's id. */
export interface RequestHead {
  name: string;
  version: string;
  id: string;
}

/** The methods whose request messages are scanned (the rest have empty request messages). */
export type ScannedMethod = 'ModelInfer' | 'ModelMetadata' | 'ModelReady' | 'ServerLive' | 'ServerReady' | 'ServerMetadata';

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_BYTES = 2;
const WIRE_FIXED32 = 5;

/** A message the walk refuses: malformed (`reason`), or past a bound (`bound`). */
class Refusal extends Error {}

/** Reads the fields of one message, up to `end`, checking each against the schema visitor. */
class Walk {
  bytesElements = 0;
  readonly r: protobuf.Reader;

  constructor(bytes: Uint8Array) {
    // A plain Uint8Array view: protobufjs reads a Buffer leniently (a string cut short is taken
    // as far as it goes), a Uint8Array strictly (a cut message is refused).
    this.r = protobuf.Reader.create(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  }

  /** Visits every field up to `end`; `visit` reads or skips the field's value. */
  fields(end: number, visit: (field: number, wire: number) => void): void {
    const r = this.r;
    while (r.pos < end) {
      const tag = r.uint32();
      const field = tag >>> 3;
      if (field === 0) throw new Refusal('a field has number 0');
      visit(field, tag & 7);
      if (r.pos > end) throw new Refusal(`field ${field} runs past the end of its message`);
    }
  }

  /** Skips a field this walk does not know (proto3 keeps unknown fields out of the decode). */
  skip(field: number, wire: number): void {
    const r = this.r;
    switch (wire) {
      case WIRE_VARINT:
        r.skipType(WIRE_VARINT);
        return;
      case WIRE_FIXED64:
        r.skip(8);
        return;
      case WIRE_BYTES:
        r.skip(r.uint32());
        return;
      case WIRE_FIXED32:
        r.skip(4);
        return;
      default:
        // Groups (3, 4) are proto2's; 6 and 7 are no wire type.
        throw new Refusal(`field ${field} has wire type ${wire}, which proto3 does not use`);
    }
  }

  expect(field: number, wire: number, want: number): void {
    if (wire !== want) throw new Refusal(`field ${field} has wire type ${wire}, not ${want}`);
  }

  /** The end of the length-delimited value that starts here. */
  lengthEnd(field: number, wire: number): number {
    this.expect(field, wire, WIRE_BYTES);
    const r = this.r;
    const end = r.uint32() + r.pos;
    if (end > r.len) throw new Refusal(`field ${field} runs past the end of the message`);
    return end;
  }

  string(field: number, wire: number): string {
    this.expect(field, wire, WIRE_BYTES);
    return this.r.string();
  }

  skipBytes(field: number, wire: number): void {
    this.expect(field, wire, WIRE_BYTES);
    this.r.skip(this.r.uint32());
  }

  message(field: number, wire: number, visit: (field: number, wire: number) => void): void {
    this.fields(this.lengthEnd(field, wire), visit);
  }

  /**
   * One varint of a known field, as protobufjs's decode reads it: at most 10 bytes (a longer one
   * is refused there, "invalid varint encoding", where skipping it is not), and a 32-bit one
   * (int32, uint32, bool) not of 6 to 9 bytes: valid varints, but protobufjs reads any 32-bit
   * varint past 5 bytes as 10 (the length of a negative int32), and would decode the rest of the
   * message from the wrong byte.
   */
  varint(field: number, bits32: boolean): void {
    const r = this.r;
    const start = r.pos;
    r.skipType(WIRE_VARINT);
    const length = r.pos - start;
    if (length > 10) throw new Refusal(`field ${field} holds a varint of ${length} bytes (at most 10)`);
    if (bits32 && length > 5 && length < 10) throw new Refusal(`field ${field} holds a 32-bit varint of ${length} bytes`);
  }

  /** A repeated number field, packed (one length-delimited run) or not (one element per field); returns how many elements. */
  numbers(field: number, wire: number, scalarWire: number, bits32 = false): number {
    if (wire === scalarWire) {
      if (wire === WIRE_VARINT) this.varint(field, bits32);
      else this.skip(field, wire);
      return 1;
    }
    const end = this.lengthEnd(field, wire);
    const r = this.r;
    const length = end - r.pos;
    if (scalarWire === WIRE_FIXED32 || scalarWire === WIRE_FIXED64) {
      const size = scalarWire === WIRE_FIXED32 ? 4 : 8;
      if (length % size !== 0) throw new Refusal(`packed field ${field} holds ${length} bytes, not a multiple of ${size}`);
      r.skip(length);
      return length / size;
    }
    let n = 0;
    while (r.pos < end) {
      this.varint(field, bits32);
      n++;
    }
    if (r.pos > end) throw new Refusal(`packed field ${field} ends inside a varint`);
    return n;
  }

  /** A `map<string, InferParameter>` entry; `count` is the entries of its map so far. */
  parameter(field: number, wire: number, count: number, where: string): number {
    if (count >= GRPC_MESSAGE_BOUNDS.parameters) throw new Refusal(`${where} has more than ${GRPC_MESSAGE_BOUNDS.parameters} parameters (the limit)`);
    let value = false;
    this.message(field, wire, (f, w) => {
      if (f === 1) this.skipBytes(f, w);
      else if (f === 2) {
        value = true;
        this.message(f, w, (pf, pw) => {
          if (pf === 1 || pf === 2) {
            this.expect(pf, pw, WIRE_VARINT);
            // bool_param is 32-bit to protobufjs; int64_param is read whole.
            this.varint(pf, pf === 1);
          } else if (pf === 3) this.skipBytes(pf, pw);
          else this.skip(pf, pw);
        });
      } else this.skip(f, w);
    });
    // protobufjs decodes an entry without a value as null, which its toObject cannot read.
    if (!value) throw new Refusal(`a parameter of ${where} has no value`);
    return count + 1;
  }

  /** InferInputTensor (`contents` set) or InferRequestedOutputTensor. */
  tensor(field: number, wire: number, where: string, isInput: boolean): void {
    let dims = 0;
    let parameters = 0;
    this.message(field, wire, (f, w) => {
      if (f === 1 || (isInput && f === 2)) this.skipBytes(f, w);
      else if (isInput && f === 3) {
        dims += this.numbers(f, w, WIRE_VARINT);
        if (dims > MAX_TENSOR_RANK) throw new Refusal(`${where} has more than ${MAX_TENSOR_RANK} dimensions (the limit)`);
      } else if ((isInput && f === 4) || (!isInput && f === 2)) parameters = this.parameter(f, w, parameters, where);
      else if (isInput && f === 5) this.message(f, w, (cf, cw) => this.contents(cf, cw));
      else this.skip(f, w);
    });
  }

  /** InferTensorContents: 1–5 varints (bool, int32 and uint32 of them 32-bit), 6 float, 7 double, 8 bytes. */
  contents(field: number, wire: number): void {
    if (field >= 1 && field <= 5) this.numbers(field, wire, WIRE_VARINT, field === 1 || field === 2 || field === 4);
    else if (field === 6) this.numbers(field, wire, WIRE_FIXED32);
    else if (field === 7) this.numbers(field, wire, WIRE_FIXED64);
    else if (field === 8) {
      if (++this.bytesElements > GRPC_MESSAGE_BOUNDS.bytesElements)
        throw new Refusal(`the request has more than ${GRPC_MESSAGE_BOUNDS.bytesElements} bytes_contents elements (the limit; send BYTES tensors this large in raw_input_contents)`);
      this.skipBytes(field, wire);
    } else this.skip(field, wire);
  }
}

function inferRequest(w: Walk, head: RequestHead): void {
  let inputs = 0;
  let outputs = 0;
  let raw = 0;
  let parameters = 0;
  const tensors = GRPC_MESSAGE_BOUNDS.tensors;
  w.fields(w.r.len, (f, wire) => {
    if (f === 1) head.name = w.string(f, wire);
    else if (f === 2) head.version = w.string(f, wire);
    else if (f === 3) head.id = w.string(f, wire);
    else if (f === 4) parameters = w.parameter(f, wire, parameters, 'the request');
    else if (f === 5) {
      if (++inputs > tensors) throw new Refusal(`the request has more than ${tensors} inputs (the limit)`);
      w.tensor(f, wire, `input ${inputs}`, true);
    } else if (f === 6) {
      if (++outputs > tensors) throw new Refusal(`the request has more than ${tensors} outputs (the limit)`);
      w.tensor(f, wire, `output ${outputs}`, false);
    } else if (f === 7) {
      if (++raw > tensors) throw new Refusal(`the request has more than ${tensors} raw_input_contents (the limit)`);
      w.skipBytes(f, wire);
    } else w.skip(f, wire);
  });
}

/**
 * Checks `bytes` as the request message of `method` and returns its head (empty strings where a
 * field is absent). Throws `invalid_request` naming what is wrong: a malformed message, or one past
 * a bound of GRPC_MESSAGE_BOUNDS.
 */
export function scanRequest(method: ScannedMethod, bytes: Uint8Array): RequestHead {
  const head: RequestHead = { name: '', version: '', id: '' };
  const w = new Walk(bytes);
  try {
    if (method === 'ModelInfer') inferRequest(w, head);
    else
      w.fields(w.r.len, (f, wire) => {
        const named = method === 'ModelMetadata' || method === 'ModelReady';
        if (named && f === 1) head.name = w.string(f, wire);
        else if (named && f === 2) head.version = w.string(f, wire);
        else w.skip(f, wire);
      });
  } catch (err) {
    const reason = err instanceof Refusal ? err.message : 'a field runs past the end of the message';
    if (!(err instanceof Refusal) && !(err instanceof RangeError) && !(err instanceof Error && /index out of range|invalid varint/.test(err.message))) throw err;
    throw new ModelmuxError('invalid_request', `the ${method} request is not a valid message: ${reason}`);
  }
  return head;
}
