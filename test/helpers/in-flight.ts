import { eventually } from '../../harness/eventually.js';
import type { ReplicaProcess } from '../../harness/replica-process.js';

/**
 * Waits until `replica` has `n` inference requests in progress (its ongoing-requests gauge,
 * which counts a request from its arrival, a test hook's delay included): what a test that acts
 * on a request "in flight" (a drain, a refusal past the limit, a swap under it) waits for,
 * instead of guessing how long the request takes to get there.
 */
export async function inFlightAt(replica: ReplicaProcess, n: number, timeoutMs = 10_000): Promise<void> {
  await eventually(async () => expect((await replica.metrics()).get('modelmux_replica_ongoing_requests')).toBe(n), timeoutMs, 20);
}
