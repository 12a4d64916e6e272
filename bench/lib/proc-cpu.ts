import { readFile, readdir } from 'node:fs/promises';

/**
 * CPU time of processes from /proc (Linux): user + system seconds, as the kernel counts them
 * (`utime` and `stime` of /proc/<pid>/stat, in clock ticks of 1/100 s on Linux).
 */
const TICKS_PER_SECOND = 100;

export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may hold spaces and parentheses: split after its closing one.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return (utime + stime) / TICKS_PER_SECOND;
}

export async function totalCpuSeconds(pids: readonly number[]): Promise<number> {
  const each = await Promise.all(pids.map((p) => cpuSeconds(p).catch(() => 0)));
  return each.reduce((a, b) => a + b, 0);
}

/** Direct children of `pid` (e.g. nginx's workers under its master). */
export async function childPids(pid: number): Promise<number[]> {
  const out: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^[0-9]+$/.test(name)) continue;
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid === pid) out.push(Number(name));
  }
  return out;
}

/** `pid` and every process below it (Ray's raylet, workers and actors; local mode's replicas). */
export async function treePids(pid: number): Promise<number[]> {
  const parentOf = new Map<number, number>();
  for (const name of await readdir('/proc')) {
    if (!/^[0-9]+$/.test(name)) continue;
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    if (stat) parentOf.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    for (const [child, parent] of parentOf) if (parent === out[i]) out.push(child);
  }
  return out;
}

/** The nice values of `pids` (field 19 of /proc/<pid>/stat), each once: which priorities a system ran at. */
export async function niceValues(pids: readonly number[]): Promise<number[]> {
  const each = await Promise.all(
    pids.map(async (p) => {
      const stat = await readFile(`/proc/${p}/stat`, 'utf8').catch(() => '');
      return stat ? Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]) : Number.NaN;
    }),
  );
  return [...new Set(each.filter((x) => !Number.isNaN(x)))].sort((a, b) => a - b);
}
