/**
 * Sums the samples of one metric in Prometheus text exposition, optionally only those whose
 * labels include every pair in `labels`. Enough for counters read between two benchmark phases.
 */
export function sumMetric(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== ' ' && rest[0] !== '{') continue; // a longer name with this prefix
    const labelText = rest[0] === '{' ? rest.slice(1, rest.indexOf('}')) : '';
    if (!Object.entries(labels).every(([k, v]) => labelText.includes(`${k}="${v}"`))) continue;
    const value = Number(rest.slice(rest.lastIndexOf(' ') + 1));
    if (Number.isFinite(value)) sum += value;
  }
  return sum;
}
