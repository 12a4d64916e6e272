/** HTTP/2 frame types, flags, error codes and settings (RFC 9113 §6, §7, §11). */
export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

export const Flag = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;

export const ErrorCode = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  SETTINGS_TIMEOUT: 0x4,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  CONNECT_ERROR: 0xa,
  ENHANCE_YOUR_CALM: 0xb,
  INADEQUATE_SECURITY: 0xc,
  HTTP_1_1_REQUIRED: 0xd,
} as const;

export const Setting = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
} as const;

export const FRAME_HEADER_BYTES = 9;
/** The smallest SETTINGS_MAX_FRAME_SIZE, which this server keeps as its own and a peer starts with. */
export const DEFAULT_MAX_FRAME_SIZE = 16_384;
export const DEFAULT_WINDOW = 65_535;
export const MAX_WINDOW = 2 ** 31 - 1;
export const CLIENT_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** One frame as read: its payload is a view of the bytes received (padding still in it). */
export interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

/** An error of the whole connection: a GOAWAY with `code` and the connection closed (RFC 9113 §5.4.1). */
export class ConnectionError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * What a frame's header alone makes a connection error, whatever the connection's state: a
 * connection frame on a stream, a stream frame on stream 0, a length its type cannot have (a
 * HEADERS too short for its priority fields included), a
 * PUSH_PROMISE from a client. Found before the payload is awaited, as nghttp2 finds it.
 */
export function frameHeaderError(type: number, flags: number, streamId: number, length: number): ConnectionError | undefined {
  const connectionLevel = type === FrameType.SETTINGS || type === FrameType.PING || type === FrameType.GOAWAY;
  if (connectionLevel && streamId !== 0) return new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'a connection frame on a stream');
  const streamLevel = type === FrameType.DATA || type === FrameType.HEADERS || type === FrameType.PRIORITY || type === FrameType.RST_STREAM || type === FrameType.CONTINUATION;
  if (streamLevel && streamId === 0) return new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'a stream frame on stream 0');
  if (type === FrameType.PUSH_PROMISE) return new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PUSH_PROMISE from a client');
  return badLength(type, flags, length) ? new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, `a frame of type ${type} and ${length} bytes`) : undefined;
}

/** A length a frame of `type` with `flags` cannot have (RFC 9113 §6). */
function badLength(type: number, flags: number, length: number): boolean {
  return (
    (type === FrameType.SETTINGS && (length % 6 !== 0 || ((flags & Flag.ACK) !== 0 && length !== 0))) ||
    (type === FrameType.PING && length !== 8) ||
    (type === FrameType.GOAWAY && length < 8) ||
    ((type === FrameType.RST_STREAM || type === FrameType.WINDOW_UPDATE) && length !== 4) ||
    (type === FrameType.HEADERS && (flags & Flag.PRIORITY) !== 0 && length < ((flags & Flag.PADDED) !== 0 ? 6 : 5))
  );
}
