import type { V1ContainerStateTerminated, V1Pod } from '@kubernetes/client-node';

/** The replica container's name in the pod template (operator/resources/deployment.ts). */
export const REPLICA_CONTAINER = 'modelmux';
/**
 * The exit code of a program that refuses its configuration at start (cli/main.ts): a flag, or an
 * execution provider that cannot run on the node. Restarting does not fix it; the spec must change.
 */
export const CONFIG_EXIT_CODE = 2;

/**
 * Why a replica pod refuses to start, when it does: its container ended with exit code 2 and is
 * not running again since (terminated now, or waiting in back-off after it). The message is the
 * replica's own (its termination log, or its log's tail under FallbackToLogsOnError). Pure.
 */
export function startRefusal(pod: V1Pod): string | undefined {
  if (pod.metadata?.deletionTimestamp !== undefined) return undefined;
  const c = pod.status?.containerStatuses?.find((s) => s.name === REPLICA_CONTAINER);
  if (c === undefined || c.state?.running !== undefined) return undefined;
  const ended: V1ContainerStateTerminated | undefined = c.state?.terminated ?? c.lastState?.terminated;
  if (ended?.exitCode !== CONFIG_EXIT_CODE) return undefined;
  const why = ended.message?.trim();
  return `pod ${pod.metadata?.name ?? '?'} exits ${CONFIG_EXIT_CODE} at start: ${why !== undefined && why !== '' ? why : 'see its log'}`;
}
