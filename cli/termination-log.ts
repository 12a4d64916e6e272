import { writeFileSync } from 'node:fs';

/** Kubernetes' default terminationMessagePath: the kubelet mounts it into each container. */
const TERMINATION_LOG = '/dev/termination-log';
/** The kubelet keeps at most 4096 bytes of it. */
const MAX_BYTES = 4096;

/**
 * Leaves why the program stops where the pod's status shows it (lastState.terminated.message),
 * so the operator can surface it. Only where the kubelet mounted the file: elsewhere, /dev is
 * not ours to write.
 */
export function writeTerminationMessage(message: string): void {
  try {
    writeFileSync(TERMINATION_LOG, Buffer.from(message).subarray(0, MAX_BYTES), { flag: 'r+' });
  } catch {
    // Not in a pod, or a read-only mount: the message is on stderr all the same.
  }
}
