import { CoreV1Api, createConfiguration, KubeConfig, PatchStrategy, ServerConfiguration, setHeaderOptions } from '@kubernetes/client-node';
import { pooledAuthentication } from '../../common/kube-connection.js';
import type { ModelTable } from '../../common/model-table.js';
import { DELETION_COST_ANNOTATION, MODELS_ANNOTATION } from '../../common/names.js';
import { encodeTableAnnotation } from '../../common/table-annotation.js';

/**
 * The merge patch of the own pod's annotations: the model table (the full list while small,
 * else its compact form: common/table-annotation.ts) and the deletion cost.
 */
export function tablePatch(table: ModelTable, deletionCost: number): { metadata: { annotations: Record<string, string> } } {
  return { metadata: { annotations: { [MODELS_ANNOTATION]: encodeTableAnnotation(table), [DELETION_COST_ANNOTATION]: String(deletionCost) } } };
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
