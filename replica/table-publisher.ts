import { CoreV1Api, createConfiguration, KubeConfig, PatchStrategy, ServerConfiguration, setHeaderOptions, type RequestContext, type SecurityAuthentication } from '@kubernetes/client-node';
import type { ModelTable } from '../common/model-table.js';
import { DELETION_COST_ANNOTATION, MODELS_ANNOTATION } from '../common/names.js';
import { encodeTableAnnotation } from '../common/table-annotation.js';

/**
 * The merge patch of the own pod's annotations: the model table (the full list while small,
 * else its compact form: common/table-annotation.ts) and the deletion cost.
 */
export function tablePatch(table: ModelTable, deletionCost: number): { metadata: { annotations: Record<string, string> } } {
  return { metadata: { annotations: { [MODELS_ANNOTATION]: encodeTableAnnotation(table), [DELETION_COST_ANNOTATION]: String(deletionCost) } } };
}

/**
 * The kubeconfig's credentials on one connection pool. client-node 2.0's KubeConfig gives every
 * request a new undici Agent, so each patch would open (and TLS-handshake) a new connection to
 * the API server: a second per replica per publication, the API server's largest cost of
 * tables (bench:tables). The first request's dispatcher carries the TLS options (CA, client
 * certificate), which do not change in a process; the token is still read per request, so a
 * rotated service-account token is picked up.
 */
function pooledAuthentication(kc: KubeConfig): SecurityAuthentication {
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

/**
 * Patches the replica's own pod, over one kept-alive connection. Credentials from
 * KubeConfig.loadFromDefault(): in-cluster the service account (KUBECONFIG when set); the Role
 * allows get/patch on pods only.
 */
export function kubePodPatcher(podName: string, namespace: string): (body: object) => Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new Error('the kubeconfig names no cluster');
  const api = new CoreV1Api(createConfiguration({ baseServer: new ServerConfiguration(cluster.server, {}), authMethods: { default: pooledAuthentication(kc) } }));
  return async (body) => {
    await api.patchNamespacedPod({ name: podName, namespace, body }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
  };
}
