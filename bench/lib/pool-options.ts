/** What both systems under test are given, so the comparison is like for like. */
export interface PoolOptions {
  port: number;
  replicas: number;
  maxModelsPerReplica: number;
  maxOngoingRequests: number;
  maxBatchSize: number;
  batchWaitMs: number;
  modelSource: string;
  s3Endpoint?: string;
}
