/** Why a connection was refused: the values of the rejected-connections metric's `reason` label. */
export type RefusalReason = 'connections' | 'client_connections';

/** The bounds on client connections of one listener; 0: no limit. */
export interface ConnectionCounts {
  maxConnections: number;
  maxConnectionsPerClient: number;
}

/** Whether a connection may be taken while `open` are open, `fromClient` of them from its address. */
export function refusal(open: number, fromClient: number, limits: ConnectionCounts): RefusalReason | undefined {
  if (limits.maxConnections > 0 && open >= limits.maxConnections) return 'connections';
  if (limits.maxConnectionsPerClient > 0 && fromClient >= limits.maxConnectionsPerClient) return 'client_connections';
  return undefined;
}
