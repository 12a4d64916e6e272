import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Request latency buckets, 1 ms to 30 s, the same for HTTP and gRPC so the two compare bucket by bucket. */
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * Every metric of the replica, declared once on an explicit registry. No label carries a model
 * id: a replica may see thousands of them.
 */
export function createReplicaMetrics() {
  const registry = new Registry();
  // Node's process metrics, as the router's: collection pauses are `modelmux_replica_nodejs_gc_duration_seconds`.
  collectDefaultMetrics({ register: registry, prefix: 'modelmux_replica_' });
  const r = [registry];
  return {
    registry,
    requests: new Counter({ name: 'modelmux_replica_requests_total', help: 'Inference requests answered, by request form and status code.', labelNames: ['form', 'code'] as const, registers: r }),
    requestDuration: new Histogram({
      name: 'modelmux_replica_request_duration_seconds',
      help: 'Inference request latency, load included, by request form.',
      labelNames: ['form'] as const,
      buckets: REQUEST_BUCKETS,
      registers: r,
    }),
    grpcRequests: new Counter({
      name: 'modelmux_replica_grpc_requests_total',
      help: 'gRPC calls answered (inference.GRPCInferenceService), by method and gRPC status name.',
      labelNames: ['method', 'code'] as const,
      registers: r,
    }),
    grpcRequestDuration: new Histogram({
      name: 'modelmux_replica_grpc_request_duration_seconds',
      help: 'gRPC ModelInfer and ModelMetadata latency, load included, by method.',
      labelNames: ['method'] as const,
      buckets: REQUEST_BUCKETS,
      registers: r,
    }),
    grpcBounds: new Counter({
      name: 'modelmux_replica_grpc_bounded_total',
      help: 'gRPC connections refused (connections) and calls ended by a bound: the message timeouts (message_total, message_idle), the write timeout (write), the byte budget (buffer_full).',
      labelNames: ['reason'] as const,
      registers: r,
    }),
    ongoing: new Gauge({ name: 'modelmux_replica_ongoing_requests', help: 'Inference requests in progress, HTTP and gRPC (the autoscaling signal).', registers: r }),
    rejected: new Counter({ name: 'modelmux_replica_overloaded_total', help: 'Requests refused with 503 overloaded (gRPC: UNAVAILABLE) at maxOngoingRequests.', registers: r }),
    cacheHits: new Counter({ name: 'modelmux_replica_cache_hits_total', help: 'Requests whose model was already loaded.', registers: r }),
    cacheMisses: new Counter({ name: 'modelmux_replica_cache_misses_total', help: 'Requests that waited for a model load.', registers: r }),
    loads: new Counter({ name: 'modelmux_replica_model_loads_total', help: 'Model loads started and finished, by result (success|failure).', labelNames: ['result'] as const, registers: r }),
    loadDuration: new Histogram({
      name: 'modelmux_replica_model_load_duration_seconds',
      help: 'Time from the start of a load (download included) to a ready session, warm-up run included.',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers: r,
    }),
    loadPhase: new Histogram({
      name: 'modelmux_replica_model_load_phase_seconds',
      help: 'Seconds of the two phases of a load after its download: load (a session opened, or a shared graph joined) and warm (the warm-up run before the model is listed).',
      labelNames: ['phase'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: r,
    }),
    fetches: new Counter({
      name: 'modelmux_replica_model_fetches_total',
      help: 'Model files fetched for a load from an S3 store, by source (store|disk|peer|disk_unverified).',
      labelNames: ['source'] as const,
      registers: r,
    }),
    loadsByTier: new Counter({
      name: 'modelmux_replica_model_loads_by_tier_total',
      help: "Model loads by the tier their bytes came from (host|disk|peer|store): host memory (--host-tier-bytes), the disk cache (a copy served while the store could not be asked counts as disk), a neighbour's download, or the store.",
      labelNames: ['tier'] as const,
      registers: r,
    }),
    loadTierDuration: new Histogram({
      name: 'modelmux_replica_model_load_tier_seconds',
      help: "Time from the start of a load to its model's bytes being ready, by the tier they came from (host|disk|peer|store): the store's revalidation and any download included, the session's creation not.",
      labelNames: ['tier'] as const,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: r,
    }),
    hostTierBytes: new Gauge({ name: 'modelmux_replica_host_tier_bytes', help: 'Bytes of model files kept in host memory (--host-tier-bytes), loaded models among them.', registers: r }),
    hostTierModels: new Gauge({ name: 'modelmux_replica_host_tier_models', help: 'Models whose file bytes are kept in host memory, loaded models among them.', registers: r }),
    opens: new Counter({
      name: 'modelmux_replica_model_opens_total',
      help: 'Models opened, by kind: shared_graph (weights fed to a session shared by models of the same graph) or own_session.',
      labelNames: ['kind'] as const,
      registers: r,
    }),
    mappedLoads: new Counter({
      name: 'modelmux_replica_mapped_loads_total',
      help: 'Shared-graph loads whose weights were viewed in the mapped file instead of read into memory.',
      registers: r,
    }),
    mappingReuses: new Counter({
      name: 'modelmux_replica_mapping_reuses_total',
      help: 'Mapped loads that took back the mapping of an earlier load of the same file instead of mapping it again.',
      registers: r,
    }),
    singleRowLoads: new Counter({
      name: 'modelmux_replica_single_row_loads_total',
      help: 'Shared-graph loads whose graph has a single-row variant: their one-row runs take a faster onnxruntime kernel.',
      registers: r,
    }),
    sharedGraphs: new Gauge({ name: 'modelmux_replica_shared_graphs', help: 'Sessions shared by the loaded models of one graph (one per model shape).', registers: r }),
    evictions: new Counter({
      name: 'modelmux_replica_model_evictions_total',
      help: 'Models leaving the cache, by reason: capacity (evicted for a newcomer) or not_admitted (loaded for its requests, then let go).',
      labelNames: ['reason'] as const,
      registers: r,
    }),
    revalidations: new Counter({
      name: 'modelmux_replica_model_revalidations_total',
      help: "Loaded models' versions checked against the store, by result (unchanged|changed|not_found|failed).",
      labelNames: ['result'] as const,
      registers: r,
    }),
    swaps: new Counter({
      name: 'modelmux_replica_model_swaps_total',
      help: 'New versions of loaded models loaded beside the old one, by result: success (swapped in) or failure (the old version serves on).',
      labelNames: ['result'] as const,
      registers: r,
    }),
    releases: new Counter({ name: 'modelmux_replica_model_releases_total', help: 'Sessions released (after eviction, once no request used them).', registers: r }),
    modelsLoaded: new Gauge({ name: 'modelmux_replica_models_loaded', help: 'Models in the cache.', registers: r }),
    modelsLoading: new Gauge({ name: 'modelmux_replica_models_loading', help: 'Models being loaded.', registers: r }),
    bytesLoaded: new Gauge({ name: 'modelmux_replica_loaded_bytes', help: 'Bytes of the model files in the cache.', registers: r }),
    deviceBytesUsed: new Gauge({
      name: 'modelmux_replica_device_bytes_used',
      help: 'cuda: device bytes charged to the sessions (estimated before a load, measured after for own sessions); 0 under cpu.',
      registers: r,
    }),
    deviceBytesBudget: new Gauge({ name: 'modelmux_replica_device_bytes_budget', help: "cuda: the replica's device memory budget; 0 under cpu (no device budget).", registers: r }),
    batchSize: new Histogram({
      name: 'modelmux_replica_batch_size_requests',
      help: 'Requests per inference run.',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
      registers: r,
    }),
    tablePublishes: new Counter({ name: 'modelmux_replica_table_publishes_total', help: 'Patches of the pod annotation, by result (success|failure).', labelNames: ['result'] as const, registers: r }),
  };
}

export type ReplicaMetrics = ReturnType<typeof createReplicaMetrics>;
