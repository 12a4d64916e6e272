import type { EXECUTION_PROVIDERS } from '../../common/resource.js';

/** How a model was opened: fed to a session its graph shares, or with a session of its own. */
export type OpenKind = 'shared_graph' | 'own_session';

/**
 * Under CUDA, a model at least this large gets a session of its own, its weights resident on
 * the device. A shared graph's weights are inputs: every run copies them host to device, at
 * about 25 GB/s over PCIe 5 from pageable memory, so 16 MiB adds 0.67 ms to each run, as much
 * as the replica's whole HTTP path, and more than a GPU takes to run such a model. Below it the
 * copy is cheaper than what an own session costs a multiplexing replica: a session created per
 * load and the weights held on the device while the model sits idle (docs/adr/0046-device-memory-budget.md).
 */
export const CUDA_OWN_SESSION_BYTES = 16 * 1024 ** 2;

/**
 * Whether a model is opened on a shared graph or a session of its own, where the pool shares
 * graphs: its config.json's `shareGraph` when it says, else by provider and size. On the CPU
 * fed weights are read in place, so graphs are shared whatever the size (ADR 0016).
 */
export function sessionKindFor(provider: (typeof EXECUTION_PROVIDERS)[number], modelBytes: number, override: boolean | undefined): OpenKind {
  if (override !== undefined) return override ? 'shared_graph' : 'own_session';
  return provider === 'cuda' && modelBytes >= CUDA_OWN_SESSION_BYTES ? 'own_session' : 'shared_graph';
}
