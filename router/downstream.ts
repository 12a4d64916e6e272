/**
 * What the proxy and the router's own endpoints use of a client's request and response: node's
 * IncomingMessage and ServerResponse fit it, and so do the fast path's (fast-path.ts).
 */
export interface DownstreamRequest {
  readonly method?: string | undefined;
  readonly url?: string | undefined;
  readonly rawHeaders: string[];
  readonly socket: { readonly remoteAddress?: string | undefined };
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
}

export interface DownstreamResponse {
  /** True from `writeHead` on. */
  readonly headersSent: boolean;
  readonly destroyed: boolean;
  readonly writableFinished: boolean;
  setHeader(name: string, value: string): unknown;
  /** `headers`: flat `[name, value, …]`, names lowercased (node's writeHead takes the same list). */
  writeHead(status: number, headers: string[]): DownstreamResponse;
  /** False when the client is slow: wait for `drain`. */
  write(chunk: Buffer): boolean;
  end(data?: string): unknown;
  destroy(): unknown;
  once(event: 'drain', listener: () => void): unknown;
  /** The response finished or the client went away. */
  on(event: 'close', listener: () => void): unknown;
}
