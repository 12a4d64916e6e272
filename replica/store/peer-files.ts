import { randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { idSegment, type ModelId } from '../../common/model-id.js';
import type { CachedFile } from './disk-file-cache.js';

/** A record another process wrote: parsed like any other input before it is trusted. */
const recordSchema = z.object({
  path: z.string().min(1),
  bytes: z.number().int().nonnegative(),
  etag: z.string().min(1),
  checkedAt: z.number().finite(),
});

/**
 * The downloads of the replicas of one machine, shared through a folder they all write: one
 * small record per model naming the file that holds its latest version and that version's ETag.
 * A replica that misses a model hard-links a neighbour's file into its own cache folder instead
 * of downloading it again, so a file is downloaded about once per machine, not once per replica.
 *
 * Each replica keeps owning the files in its own folder (its DiskFileCache evicts and deletes
 * them); a link is a second name of the same bytes, so a neighbour deleting its name later
 * takes nothing from the borrower. A record is written to a temporary name and renamed, so a
 * reader sees a whole record or the one before it; a record whose file is gone is skipped.
 * The same ETag rules apply to a borrowed file as to an own one: it carries the time the store
 * last confirmed it, and is revalidated once that is older than the window.
 */
export class PeerFiles {
  private disabled = false;

  /**
   * Creates `dir` (mode 0700) when missing. Throws when another user could write it: whoever
   * writes a record chooses the file the replicas load. `onCrossDevice` is told once that the
   * files are on another filesystem than the caller's folder: borrowing stops.
   */
  constructor(
    private readonly dir: string,
    private readonly onCrossDevice: () => void,
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const st = statSync(dir);
    if (!st.isDirectory()) throw new Error(`${dir} is not a folder`);
    if ((st.mode & 0o022) !== 0 || st.uid !== process.getuid?.()) {
      throw new Error(`${dir} must belong to this user and be writable by it alone (chmod 700)`);
    }
  }

  /**
   * Names `file` as the current holder of `id`. Called once onnxruntime has accepted the file,
   * so a neighbour is never pointed at a model that fails to load.
   */
  publish(id: ModelId, file: CachedFile): void {
    if (file.etag === '') return; // without a version a borrower could never revalidate it
    const record = JSON.stringify({ path: file.path, bytes: file.bytes, etag: file.etag, checkedAt: file.checkedAt });
    const tmp = join(this.dir, `.${idSegment(id)}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      writeFileSync(tmp, record, { mode: 0o600 });
      renameSync(tmp, this.recordPath(id));
    } catch {
      // Sharing is an optimisation: a full or read-only folder costs downloads, not answers.
      rmSync(tmp, { force: true });
    }
  }

  /**
   * A neighbour's file of `id`, linked at `path` (in the caller's own folder), or undefined
   * when no neighbour has one, its file is gone, or it is not what its record says.
   */
  borrow(id: ModelId, path: string): CachedFile | undefined {
    if (this.disabled) return undefined;
    let record: z.infer<typeof recordSchema>;
    try {
      const parsed = recordSchema.safeParse(JSON.parse(readFileSync(this.recordPath(id), 'utf8')));
      if (!parsed.success) return undefined;
      record = parsed.data;
      linkSync(record.path, path);
    } catch (err) {
      // Hard links cannot cross filesystems: every later borrow would fail the same way.
      if ((err as NodeJS.ErrnoException).code === 'EXDEV') {
        this.disabled = true;
        this.onCrossDevice();
      }
      return undefined;
    }
    // Names are never reused, so this only catches a record edited or damaged by hand.
    if (statSync(path, { throwIfNoEntry: false })?.size !== record.bytes) {
      rmSync(path, { force: true });
      return undefined;
    }
    return { path, bytes: record.bytes, etag: record.etag, checkedAt: record.checkedAt };
  }

  private recordPath(id: ModelId): string {
    return join(this.dir, `${idSegment(id)}.json`);
  }
}
