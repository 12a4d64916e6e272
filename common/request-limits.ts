/**
 * Bounds that the router and the replica share under one flag name, so that a request one takes
 * the other takes too (issue 47: the two defaults of --max-body-bytes once differed, 10 and 8 MiB).
 */

/** --max-body-bytes: the largest HTTP request body and gRPC request message. */
export const DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024;

/** --body-idle-timeout-ms: the longest gap between two bytes of a body or message. */
export const DEFAULT_BODY_IDLE_TIMEOUT_MS = 30_000;

/** --body-timeout-ms: a body or message must be whole this long after its head. */
export const DEFAULT_BODY_TIMEOUT_MS = 120_000;

/** --write-timeout-ms: answer bytes a client does not take, with no progress this long, end its connection (HTTP) or call (gRPC). */
export const DEFAULT_WRITE_TIMEOUT_MS = 30_000;
