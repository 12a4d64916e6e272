import type { KubeConfig, RequestContext, SecurityAuthentication } from '@kubernetes/client-node';

/**
 * The kubeconfig's credentials on one connection pool. client-node 2.0's KubeConfig gives every
 * request a new undici Agent, so each call would open (and TLS-handshake) a new connection to
 * the API server: for a replica, one per table publication, the API server's largest cost of
 * tables (bench:tables); for the operator, one per applied object. The first request's
 * dispatcher carries the TLS options (CA, client certificate), which do not change in a
 * process; the token is still read per request, so a rotated service-account token is picked up.
 */
export function pooledAuthentication(kc: KubeConfig): SecurityAuthentication {
  let dispatcher: ReturnType<RequestContext['getDispatcher']>;
  return {
    getName: () => 'kubeconfig, one connection pool',
    applySecurityAuthentication: async (context) => {
      await kc.applySecurityAuthentication(context);
      const fresh = context.getDispatcher();
      if (fresh === undefined) return;
      dispatcher ??= fresh;
      context.setDispatcher(dispatcher);
    },
  };
}
