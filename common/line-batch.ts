/**
 * Where a program's log lines go: one line (no newline) and whether it must go out at once.
 * Programs log to stdout as JSON lines (common/log.ts); the router's access log shares the sink.
 */
export type LineSink = (line: string, urgent: boolean) => void;

/**
 * Lines gathered into one write: a line waits at most `flushMs`, or until `maxBufferedChars`
 * are buffered, so that a busy process makes one write per batch instead of one per line (a
 * write per line cost the router ~5% and a replica 3–5% of its CPU under load). An urgent line
 * (a warning, an error, a failed request) goes out at once with what was buffered before it,
 * so order is kept. Whoever owns the batch flushes it before the process exits.
 */
export class LineBatch {
  private buffer = '';
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly write: (chunk: string) => void,
    private readonly flushMs = 50,
    private readonly maxBufferedChars = 64 * 1024,
  ) {}

  readonly add: LineSink = (line, urgent) => {
    this.buffer += line + '\n';
    if (urgent || this.buffer.length >= this.maxBufferedChars) this.flush();
    else if (this.timer === undefined) {
      this.timer = setTimeout(this.flush, this.flushMs);
      // Buffered lines never keep the process alive: the exit hook flushes them.
      this.timer.unref();
    }
  };

  /** Writes what is buffered now. */
  readonly flush = (): void => {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.buffer === '') return;
    const chunk = this.buffer;
    this.buffer = '';
    this.write(chunk);
  };
}
