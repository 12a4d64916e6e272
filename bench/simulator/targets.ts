import { PATTERNS } from './patterns.js';
import type { PolicyName, SimResult } from './simulate.js';

/** The targets, per pattern: loads ≤ 1.2 × ideal and ≤ Ray-like, p99 wait < Ray-like. */
export function targets(results: readonly SimResult[]): { pattern: string; loadsVsIdeal: boolean; loadsVsRay: boolean; p99VsRay: boolean }[] {
  const by = (pattern: string, policy: PolicyName): SimResult | undefined => results.find((r) => r.pattern === pattern && r.policy === policy);
  return PATTERNS.map((pattern) => {
    const mine = by(pattern, 'modelmux');
    const ray = by(pattern, 'ray-like');
    const ideal = by(pattern, 'ideal');
    if (!mine || !ray || !ideal) return { pattern, loadsVsIdeal: false, loadsVsRay: false, p99VsRay: false };
    return { pattern, loadsVsIdeal: mine.loadsPer1000 <= 1.2 * ideal.loadsPer1000, loadsVsRay: mine.loadsPer1000 <= ray.loadsPer1000, p99VsRay: mine.p99WaitMs < ray.p99WaitMs };
  });
}
