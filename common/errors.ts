/**
 * The one catalogue of error codes that modelmux answers with, router and replica alike.
 * Codes are stable: clients and dashboards match on them. Every code is documented in
 * docs/errors.md (a unit test checks it).
 */
export const ERROR_CATALOGUE = {
  invalid_model_id: { status: 400, summary: 'The model id is malformed (empty, too long, a "/" outside an archive key, "..", or a control character).' },
  missing_model_id: { status: 400, summary: 'The request form needs a model id and none was given.' },
  invalid_request: { status: 400, summary: 'The body is not valid JSON or not a valid inference request.' },
  input_mismatch: { status: 400, summary: "An input's name, shape or datatype does not match the model's inputs." },
  model_header_in_connection: { status: 400, summary: 'The Connection header names a header that carries the model id; a proxy would drop it, so router and replica refuse the request.' },
  invalid_runtime_request: {
    status: 400,
    summary:
      "A SageMaker runtime API call (POST /endpoints/{name}/invocations) SageMaker would refuse: an endpoint name that is not valid or not the route's, or a CustomAttributes or InferenceId header out of SageMaker's bounds; answered as ValidationError.",
  },
  bad_request: { status: 400, summary: 'The request is not valid HTTP/1.1 (a malformed request line, header or framing); the router answers and closes the connection.' },
  repository_api_unauthorized: {
    status: 401,
    summary: "A model repository API call (load, unload, index) on the router's public port without the bearer token of --repository-api-token, or with another one.",
  },
  repository_api_disabled: {
    status: 403,
    summary:
      "A model repository API call (load, unload, index) on the router's public port, which does not serve that API: use the admin port (--admin-port), or start the router with --repository-api-token.",
  },
  not_found: { status: 404, summary: 'No such path.' },
  model_not_found: { status: 404, summary: 'The model store holds no model with this id.' },
  route_not_found: { status: 404, summary: 'No MultiplexedDeployment route matches the path.' },
  request_timeout: { status: 408, summary: 'The request head or body did not arrive within its timeout; the router closes the connection.' },
  body_too_large: { status: 413, summary: 'The request body is larger than the configured limit.' },
  unsupported_media_type: { status: 415, summary: 'The body is not JSON.' },
  composite_client_limit: {
    status: 429,
    summary: "The client's address has as many ensemble and sequence requests under way, or as many bytes held by them, as the router allows one address; retry after the Retry-After seconds.",
  },
  client_connection_limit: { status: 429, summary: "The client's address has as many connections open to the router as it may; retry after the Retry-After seconds." },
  model_load_failed: { status: 422, summary: 'The model file exists but onnxruntime cannot load it (corrupt or unsupported); it is not cached and the next request tries again.' },
  archive_invalid: {
    status: 422,
    summary:
      'The model is a model.tar.gz archive the replica refuses: not gzip or tar, past its size or entry bounds, an entry that is a link or leaves the folder, or no single ONNX model in it; nothing of it is cached.',
  },
  model_too_large: { status: 422, summary: 'The model file is larger than the replica may cache, or (under CUDA) needs more device memory than its whole device budget.' },
  client_closed: {
    status: 499,
    summary: "The client closed its connection, or cancelled its gRPC call, before the answer: nothing was sent. Logged and counted as 499 (nginx's code, Envoy's DC), never as a failure of the pool.",
  },
  headers_too_large: { status: 431, summary: 'The request head is larger than the router reads (16 KiB).' },
  inference_failed: { status: 500, summary: 'onnxruntime failed while running the model.' },
  internal: { status: 500, summary: 'An unexpected error; the log line with the same request id says more.' },
  ensemble_quorum: { status: 502, summary: "Too many of an ensemble route's members failed for its quorum; the message lists each member's error." },
  ensemble_mismatch: {
    status: 502,
    summary: "An ensemble route's members answered outputs that cannot be combined (a missing output, another shape or datatype, a datatype the combiner does not take).",
  },
  sequence_mapping: {
    status: 502,
    summary: "A sequence route's step cannot be given its inputs: a tensor its mapping names is missing, or has another datatype or shape; the message names the step and the tensor.",
  },
  sequence_step_failed: { status: 502, summary: 'A later step of a sequence route refused the request the router built for it, or answered no V2 outputs; the message names the step.' },
  composite_member_limit: {
    status: 502,
    summary: 'An ensemble or sequence route, with the composite routes it names, needs more member requests for one request than the router sends (--composite-max-member-requests).',
  },
  upstream_unavailable: { status: 502, summary: 'The router could not reach a replica, even after a retry on another one.' },
  store_unavailable: { status: 503, summary: 'The model store cannot be reached or refused access.' },
  overloaded: { status: 503, summary: 'The replica is at maxOngoingRequests; a router retries elsewhere.' },
  pool_saturated: { status: 503, summary: "The router's wait queue is full; retry after the Retry-After seconds." },
  no_replicas: { status: 503, summary: 'The route has no ready replica.' },
  runtime_unavailable: { status: 503, summary: 'Sidecar mode: the serving runtime beside the replica is not ready or cannot be reached.' },
  shutting_down: { status: 503, summary: 'The process is draining after SIGTERM.' },
  device_memory_full: {
    status: 503,
    summary: "Under CUDA, the model does not fit the replica's device budget beside the models in use or loading, even after evicting the others; a router retries elsewhere.",
  },
  connection_limit: { status: 503, summary: 'The router has as many client connections open as it may; retry after the Retry-After seconds.' },
  buffer_full: { status: 503, summary: 'The router holds as many request and answer bytes as it may; retry after the Retry-After seconds.' },
  composite_saturated: { status: 503, summary: 'The router has as many ensemble and sequence requests under way as it may; retry after the Retry-After seconds.' },
  timeout: { status: 504, summary: 'The request did not finish within its deadline.' },
  ensemble_deadline: { status: 504, summary: "Fewer of an ensemble route's members than its quorum answered before its deadline." },
  cache_full: { status: 507, summary: "The replica's disk is full while writing a model file, even after dropping the files of models it does not hold loaded; nothing is cached." },
  route_cycle: { status: 508, summary: 'The model name is a ModelRoute that refers back to itself through other routes (or passes through more than 8); its status says ResolvedRefs=False.' },
} as const;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/**
 * Codes a replica answers before doing any of the request's work: marked `x-modelmux-overloaded`
 * (HTTP header, gRPC trailer) so that a router may send the request to another replica.
 */
export function refusedBeforeWork(code: ErrorCode): boolean {
  return code === 'overloaded' || code === 'shutting_down' || code === 'device_memory_full';
}

/** The JSON body of every error answer. */
export interface ErrorBody {
  error: ErrorCode;
  message: string;
  requestId?: string;
}

/** An error that knows its stable code and so its HTTP status. */
export class ModelmuxError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ModelmuxError';
    this.code = code;
    this.status = ERROR_CATALOGUE[code].status;
  }
}

/** Maps anything thrown to a catalogue error; unknown throws become `internal`. */
export function toModelmuxError(err: unknown): ModelmuxError {
  if (err instanceof ModelmuxError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new ModelmuxError('internal', message, { cause: err });
}
