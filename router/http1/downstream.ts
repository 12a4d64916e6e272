/**
 * What the proxy and the router's own endpoints use of a client's request and response: node's
 * IncomingMessage and ServerResponse fit it, and so do the fast path's (fast-path.ts).
 */
export interface DownstreamRequest {
  readonly method?: string | undefined;
  readonly url?: string | undefined;
  readonly rawHeaders: string[];
  /** The client's connection: its 'drain' and 'close' tell when an answer queued on it is gone (ADR 0026). */
  readonly socket: {
    readonly remoteAddress?: string | undefined;
    once(event: 'drain' | 'close', listener: () => void): unknown;
    removeListener(event: 'drain' | 'close', listener: () => void): unknown;
  };
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
  /**
   * The listener has copied `chunk` and keeps no view of it: a request whose chunks are its
   * connection's reads frees the read at once (common/read-release.ts). Absent where chunks are
   * shared, as an in-memory request's body sent to several members.
   */
  release?(chunk: Buffer): void;
}

export interface DownstreamResponse {
  /** True from `writeHead` on. */
  readonly headersSent: boolean;
  readonly destroyed: boolean;
  readonly writableFinished: boolean;
  setHeader(name: string, value: string): unknown;
  /** `headers`: flat `[name, value, …]`, names lowercased (node's writeHead takes the same list). */
  writeHead(status: number, headers: string[]): DownstreamResponse;
  /** False when the client is slow: its connection's `drain` says when it caught up. */
  write(chunk: Buffer): boolean;
  end(data?: string): unknown;
  destroy(): unknown;
  /** The response finished or the client went away. */
  on(event: 'close', listener: () => void): unknown;
}
