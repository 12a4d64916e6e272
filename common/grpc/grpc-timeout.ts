/**
 * The `grpc-timeout` request header (gRPC over HTTP/2: "TimeoutValue TimeoutUnit", at most 8
 * digits; H, M, S, m, u, n) in milliseconds; undefined when the header is malformed. Pure.
 */
const UNIT_MS: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000_001 };

export function grpcTimeoutMs(value: string): number | undefined {
  const m = /^(\d{1,8})([HMSmun])$/.exec(value.trim());
  if (m === null) return undefined;
  return Number(m[1]) * (UNIT_MS[m[2] as string] as number);
}
