import { Flag, FRAME_HEADER_BYTES, FrameType } from './frame-types.js';

/** Writes a 9-byte frame header at `at` of `out`. */
function header(out: Buffer, at: number, length: number, type: number, flags: number, streamId: number): void {
  out.writeUIntBE(length, at, 3);
  out[at + 3] = type;
  out[at + 4] = flags;
  out.writeUInt32BE(streamId, at + 5);
}

/** One frame with `payload`. */
export function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  header(out, 0, payload.length, type, flags, streamId);
  payload.copy(out, FRAME_HEADER_BYTES);
  return out;
}

/** SETTINGS with `[id, value]` pairs. */
export function settingsFrame(settings: readonly (readonly [number, number])[]): Buffer {
  const payload = Buffer.allocUnsafe(6 * settings.length);
  settings.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, 6 * i);
    payload.writeUInt32BE(value, 6 * i + 2);
  });
  return frame(FrameType.SETTINGS, 0, 0, payload);
}

export const SETTINGS_ACK = frame(FrameType.SETTINGS, Flag.ACK, 0);

export function pingFrame(data: Buffer, ack: boolean): Buffer {
  return frame(FrameType.PING, ack ? Flag.ACK : 0, 0, data);
}

function u32Frame(type: number, streamId: number, value: number): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 4);
  header(out, 0, 4, type, 0, streamId);
  out.writeUInt32BE(value, FRAME_HEADER_BYTES);
  return out;
}

export function rstStreamFrame(streamId: number, code: number): Buffer {
  return u32Frame(FrameType.RST_STREAM, streamId, code);
}

export function windowUpdateFrame(streamId: number, increment: number): Buffer {
  return u32Frame(FrameType.WINDOW_UPDATE, streamId, increment);
}

export function goawayFrame(lastStreamId: number, code: number): Buffer {
  const payload = Buffer.allocUnsafe(8);
  payload.writeUInt32BE(lastStreamId, 0);
  payload.writeUInt32BE(code, 4);
  return frame(FrameType.GOAWAY, 0, 0, payload);
}

/** `block` as frames of at most `maxFrame` bytes written into `out` at `at`: the first of `firstType` flagged `firstFlags`, the rest of `restType`, the last also flagged `lastFlags`. */
function split(out: Buffer, at: number, block: Buffer, maxFrame: number, streamId: number, firstType: number, restType: number, firstFlags: number, lastFlags: number): void {
  let from = 0;
  let type = firstType;
  let flags = firstFlags;
  do {
    const n = Math.min(maxFrame, block.length - from);
    const last = from + n === block.length;
    header(out, at, n, type, last ? flags | lastFlags : flags, streamId);
    block.copy(out, at + FRAME_HEADER_BYTES, from, from + n);
    at += FRAME_HEADER_BYTES + n;
    from += n;
    type = restType;
    flags = 0;
  } while (from < block.length);
}

function framedBytes(length: number, maxFrame: number): number {
  return length + FRAME_HEADER_BYTES * Math.max(1, Math.ceil(length / maxFrame));
}

/** A header block as HEADERS and the CONTINUATIONs it needs at the peer's `maxFrame` (END_STREAM with `endStream`). */
export function headersFrames(streamId: number, block: Buffer, maxFrame: number, endStream: boolean): Buffer {
  const out = Buffer.allocUnsafe(framedBytes(block.length, maxFrame));
  split(out, 0, block, maxFrame, streamId, FrameType.HEADERS, FrameType.CONTINUATION, endStream ? Flag.END_STREAM : 0, Flag.END_HEADERS);
  return out;
}

/** `data` as DATA frames at the peer's `maxFrame` (END_STREAM on the last with `endStream`). */
export function dataFrames(streamId: number, data: Buffer, maxFrame: number, endStream: boolean): Buffer {
  const out = Buffer.allocUnsafe(framedBytes(data.length, maxFrame));
  split(out, 0, data, maxFrame, streamId, FrameType.DATA, FrameType.DATA, 0, endStream ? Flag.END_STREAM : 0);
  return out;
}
