/** Names shared by the operator, the router and the replicas: the contracts between them. */

export const API_GROUP = 'modelmux.io';
export const API_VERSION = 'v1alpha1';
export const KIND = 'MultiplexedDeployment';
export const PLURAL = 'multiplexeddeployments';

/** Pod annotation holding the replica's model table (JSON, see model-table.ts). */
export const MODELS_ANNOTATION = 'modelmux.io/models';
/** Read by the ReplicaSet controller on scale-down: the lowest cost goes first. */
export const DELETION_COST_ANNOTATION = 'controller.kubernetes.io/pod-deletion-cost';

export const LABEL_DEPLOYMENT = 'modelmux.io/deployment';
/** The replica container's port of its gRPC service: the operator names it, kube discovery finds it by it. */
export const GRPC_PORT_NAME = 'grpc';
export const LABEL_COMPONENT = 'app.kubernetes.io/component';
export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
export const LABEL_NAME = 'app.kubernetes.io/name';

/** Request headers that carry a model id, in the order they are looked at. */
export const HEADER_RAY_MODEL_ID = 'serve_multiplexed_model_id';
export const HEADER_RAY_MODEL_ID_HYPHEN = 'serve-multiplexed-model-id';
export const HEADER_SAGEMAKER_MODEL = 'x-amzn-sagemaker-target-model';

export const HEADER_REQUEST_ID = 'x-request-id';
/** Response headers a replica sets so a router learns its table without the annotation round trip. */
export const HEADER_TABLE_VERSION = 'x-modelmux-table-version';
export const HEADER_REPLICA = 'x-modelmux-replica';
/** On every answer to a request for a ModelRoute's public name: the model id that served it. */
export const HEADER_BACKEND = 'x-modelmux-backend';
/** `hit` when the model was already loaded, `miss` when this request waited for a load. */
export const HEADER_CACHE = 'x-modelmux-cache';
/** Set by a replica on a 503 it gives before any work (full, or shutting down), so a router may retry elsewhere. */
export const HEADER_OVERLOADED = 'x-modelmux-overloaded';
