import { CoordinationV1Api, createConfiguration, CustomObjectsApi, KubernetesObjectApi, ServerConfiguration, type Configuration, type KubeConfig, type Middleware } from '@kubernetes/client-node';
import { pooledAuthentication } from '../common/kube-connection.js';
import { apiVerb, type ApiVerb } from './api-verb.js';

/** Who in the operator makes a request: each gets its own clients, so the metric can tell them apart. */
export type ApiCaller = 'reconcile' | 'informer' | 'leader_election';

/** A request the API server has not answered in this long is abandoned (the caller retries). */
const REQUEST_TIMEOUT_MS = 30_000;

/** client-node's API clients on one configuration. */
export interface ApiClients {
  /** Any kind by apiVersion and kind: server-side apply, create, delete, list. */
  objects: KubernetesObjectApi;
  /** The status subresource of MultiplexedDeployments. */
  custom: CustomObjectsApi;
  /** Leases. */
  coordination: CoordinationV1Api;
}

/**
 * client-node's clients over the kubeconfig's credentials on one connection pool
 * (common/kube-connection.ts), plus a middleware that counts every request with its verb
 * (`onRequest`) and bounds it in time (client-node's fetch has no timeout of its own).
 */
export function apiClients(kc: KubeConfig, onRequest: (verb: ApiVerb) => void): ApiClients {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig has no current cluster');
  const countAndBound: Middleware = {
    pre: (ctx) => {
      onRequest(apiVerb(ctx.getHttpMethod(), new URL(ctx.getUrl()), ctx.getHeaders()['Content-Type']));
      ctx.setSignal(AbortSignal.timeout(REQUEST_TIMEOUT_MS));
      return Promise.resolve(ctx);
    },
    post: (res) => Promise.resolve(res),
  };
  const configuration: Configuration = createConfiguration({
    baseServer: new ServerConfiguration(cluster.server, {}),
    authMethods: { default: pooledAuthentication(kc) },
    promiseMiddleware: [countAndBound],
  });
  return { objects: new KubernetesObjectApi(configuration), custom: new CustomObjectsApi(configuration), coordination: new CoordinationV1Api(configuration) };
}
