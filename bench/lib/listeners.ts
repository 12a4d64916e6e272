import { readFile, readdir, readlink } from 'node:fs/promises';

/**
 * The TCP sockets a set of processes listens on, from /proc (Linux): which address and port, and
 * the program that owns each. The report shows them as evidence of what ran (HAProxy owning
 * Ray's HTTP port in its high-throughput mode, Ray's proxy in its default one) and of what
 * listened beyond loopback.
 */
export interface Listener {
  address: string;
  port: number;
  pid: number;
  /** /proc/<pid>/comm: e.g. `haproxy`, `ray::ProxyActor`, `node`. */
  program: string;
}

/** `0100007F:1F90` (little-endian IPv4) or the 32-hex-digit IPv6 form → printable address and port. */
export function parseProcAddress(hex: string): { address: string; port: number } {
  const [addr = '', port = '0'] = hex.split(':');
  if (addr.length === 8) {
    const bytes = [6, 4, 2, 0].map((i) => parseInt(addr.slice(i, i + 2), 16));
    return { address: bytes.join('.'), port: parseInt(port, 16) };
  }
  if (/^0+$/.test(addr)) return { address: '::', port: parseInt(port, 16) };
  if (addr === '00000000000000000000000001000000') return { address: '::1', port: parseInt(port, 16) };
  return { address: `ipv6:${addr}`, port: parseInt(port, 16) };
}

/** Listening sockets' inode → address, from /proc/net/tcp and tcp6 (state 0A is LISTEN). */
async function listeningInodes(): Promise<Map<string, { address: string; port: number }>> {
  const out = new Map<string, { address: string; port: number }>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readFile(file, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[3] === '0A' && f[1] && f[9]) out.set(f[9], parseProcAddress(f[1]));
    }
  }
  return out;
}

export async function listenersOf(pids: readonly number[]): Promise<Listener[]> {
  const inodes = await listeningInodes();
  const out: Listener[] = [];
  for (const pid of pids) {
    const program = (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '?')).trim();
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => []);
    for (const fd of fds) {
      const m = /^socket:\[(\d+)\]$/.exec(await readlink(`/proc/${pid}/fd/${fd}`).catch(() => ''));
      const at = m ? inodes.get(m[1] as string) : undefined;
      if (at && !out.some((l) => l.port === at.port && l.address === at.address)) out.push({ ...at, pid, program });
    }
  }
  return out.sort((a, b) => a.port - b.port);
}

export const isLoopback = (address: string): boolean => address.startsWith('127.') || address === '::1';
