import type { DoctorReport } from '../common/cuda/provider-report.js';

/** The doctor's report for a person: one line per provider, the libraries that failed, the GPUs. */
export function formatDoctorReport(r: DoctorReport): string {
  const { cpu, cuda } = r.providers;
  const lines = [`onnxruntime ${r.onnxruntime.version} (${r.onnxruntime.library})`, `cpu: ${cpu.state === 'ok' ? 'ok' : `${cpu.state}: ${cpu.reason}`}`];
  lines.push(`cuda: ${cuda.state === 'ok' ? 'ok' : `${cuda.state}: ${cuda.reason}`}`);
  if (cuda.folder !== undefined) {
    const loaded = cuda.libraries.filter((l) => l.loaded).length;
    lines.push(`  ${loaded} of ${cuda.libraries.length} libraries of ${cuda.folder} load`);
    for (const l of cuda.libraries.filter((x) => !x.loaded)) lines.push(`  ${l.file}: ${l.missing !== undefined ? `needs ${l.missing}` : (l.error ?? 'does not load')}`);
  }
  lines.push(r.gpus.length === 0 ? 'gpus: none seen' : `gpus: ${r.gpus.length}`);
  for (const g of r.gpus) lines.push(`  ${g.index}: ${g.name}${g.memoryMiB !== undefined ? `, ${g.memoryMiB} MiB` : ''}${g.driver !== undefined ? `, driver ${g.driver}` : ''} (${g.source})`);
  return `${lines.join('\n')}\n`;
}
