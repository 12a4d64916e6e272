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

/**
 * Like sumMetric, but undefined when the process does not declare the metric (no `# TYPE` line
 * for `family`, the name without a histogram's `_sum`/`_count`): a metric it does not expose
 * (yet) is reported as absent, never as zero. A declared metric with no sample for these labels
 * (a labelled counter before its first count) is 0.
 */
export function readMetric(text: string, name: string, labels: Record<string, string> = {}, family = name): number | undefined {
  return text.includes(`# TYPE ${family} `) ? sumMetric(text, name, labels) : undefined;
}
