/** Model loads of a system so far: how many, and their durations added up (load start to ready session). */
export interface LoadStats {
  count: number;
  totalSeconds: number;
}
