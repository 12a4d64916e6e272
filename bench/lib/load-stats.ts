/** Model loads of a system so far: how many, and their durations added up (load start to ready session). */
export interface LoadStats {
  count: number;
  totalSeconds: number;
  /** Model files fetched from the store so far: a load can instead read a copy on local disk. */
  downloads: number;
}
