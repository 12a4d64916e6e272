/** ES2024's ArrayBuffer methods (the project's lib is ES2023; Node 24 and 26 have them). */
type Detachable = ArrayBuffer & { readonly detached?: boolean; transfer?: (newLength: number) => ArrayBuffer };

/**
 * Frees a socket read's memory once its bytes have been copied out, instead of at V8's next
 * full collection. Each read of a request body is a fresh ArrayBuffer outside the heap (64 KiB
 * from a net socket, one per body chunk from node:http); V8 answers external memory that grows
 * by megabytes per request with an incremental mark-compact every few large requests, which
 * cost the router and the replicas more than the copy itself (docs/adr/0051-replica-request-path.md).
 * Detaching (`transfer(0)`) frees it at once and takes it off V8's count.
 *
 * Only a chunk that spans its whole ArrayBuffer is released: any other is a view that shares
 * memory with bytes someone still reads (a pipelined request's head, Buffer's 8 KiB slab).
 * The caller must hold no other view of it, and call this only after it has copied what it
 * keeps; a non-detachable buffer is left to the collector, as before.
 */
export function releaseRead(chunk: Buffer): void {
  const ab = chunk.buffer as Detachable;
  if (chunk.byteOffset !== 0 || chunk.byteLength !== ab.byteLength || ab.byteLength === 0 || ab.detached === true || ab.transfer === undefined) return;
  try {
    ab.transfer(0);
  } catch {
    // Not detachable (an embedder's buffer): the collector frees it.
  }
}
