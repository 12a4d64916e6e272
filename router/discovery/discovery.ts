import type { ModelTable } from '../../common/model-table.js';

/**
 * Where routes and replicas come from: Kubernetes (MultiplexedDeployments and their ready
 * pods) or a static list (local mode, tests). Both give the same snapshot to the route table.
 */
export interface ReplicaEndpoint {
  /** Stable across router instances: the pod name, or the URL in static mode. */
  name: string;
  /** `http://host:port` of the replica. */
  url: string;
  /** `host:port` of the replica's gRPC service, when it serves one (router/grpc/grpc-sessions.ts). */
  grpc?: string | undefined;
  /** The replica's model table, when known and valid. */
  table: ModelTable | undefined;
}

export interface RouteState {
  /** `/wine`: one path segment. */
  prefix: string;
  /**
   * The pool as ModelRoutes name it (routes-source.ts): `namespace/name` of the
   * MultiplexedDeployment in kube mode; the prefix without its slash when absent (static mode).
   */
  pool?: string;
  maxOngoingRequests: number;
  matchTimeoutMs: number;
  /**
   * How old a replica's table may be when it arrives, when the route says (kube: the pool's
   * tablePublishIntervalMs plus a second); the router's own default otherwise.
   */
  tableLagMs?: number;
  replicas: ReplicaEndpoint[];
}

export interface Discovery {
  /** Starts watching; `onUpdate` gets the full set of routes after every change. */
  start(onUpdate: (routes: RouteState[]) => void): Promise<void>;
  stop(): void;
}
