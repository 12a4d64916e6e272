import { mkdirSync, openSync, closeSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Pod addresses 127.0.0.10–127.0.0.254, unique on the machine: several test runs (one per
 * engineer, or CI next to a developer) may run node agents at once, and two pods on one
 * address would fight over the replica port. A lock file per address holds the owner's pid;
 * a lock whose owner is dead is taken over.
 */
const LOCK_DIR = join(tmpdir(), 'modelmux-test-addresses');
const FIRST = 10;
const LAST = 254;

const held = new Set<string>();

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function tryLock(address: string): boolean {
  const path = join(LOCK_DIR, address);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let owner = NaN;
      try {
        owner = Number(readFileSync(path, 'utf8'));
      } catch {
        // Released between our open and read: try again.
      }
      if (Number.isInteger(owner) && owner > 0 && alive(owner)) return false;
      try {
        unlinkSync(path);
      } catch {
        // Someone else took it over first; the next open decides.
      }
    }
  }
  return false;
}

/** Takes the lowest free address; throws when all 245 are taken. */
export function acquireLoopbackAddress(): string {
  mkdirSync(LOCK_DIR, { recursive: true });
  for (let x = FIRST; x <= LAST; x++) {
    const address = `127.0.0.${x}`;
    if (held.has(address)) continue;
    if (tryLock(address)) {
      held.add(address);
      return address;
    }
  }
  throw new Error('no free loopback address in 127.0.0.10-254');
}

export function releaseLoopbackAddress(address: string): void {
  if (!held.delete(address)) return;
  try {
    unlinkSync(join(LOCK_DIR, address));
  } catch {
    // Already removed.
  }
}

// Locks of a process that exits normally are released at once; after a crash the pid check frees them.
process.once('exit', () => {
  for (const address of held) releaseLoopbackAddress(address);
});
