import { CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { ModelTable } from '../common/model-table.js';
import { DELETION_COST_ANNOTATION, MODELS_ANNOTATION } from '../common/names.js';

/** The merge patch of the own pod's annotations: the model table and the deletion cost. */
export function tablePatch(table: ModelTable, deletionCost: number): { metadata: { annotations: Record<string, string> } } {
  return { metadata: { annotations: { [MODELS_ANNOTATION]: JSON.stringify(table), [DELETION_COST_ANNOTATION]: String(deletionCost) } } };
}

/**
 * Patches the replica's own pod. Credentials from KubeConfig.loadFromDefault(): in-cluster the
 * service account (KUBECONFIG when set); the Role allows get/patch on pods only.
 */
export function kubePodPatcher(podName: string, namespace: string): (body: object) => Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const api = kc.makeApiClient(CoreV1Api);
  return async (body) => {
    await api.patchNamespacedPod({ name: podName, namespace, body }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
  };
}
