import { connect, type Socket } from 'node:net';

export interface RawClientOptions {
  host?: string;
  /** Connect from this local address (any 127.0.0.0/8 address), to appear as another client. */
  localAddress?: string;
  /** Keep our side open after the server ends its side. */
  allowHalfOpen?: boolean;
}

/**
 * A client connection that writes bytes as given and collects, as latin1 text, everything the
 * server sends: for tests of what a server does with requests no HTTP client would send.
 */
export class RawClient {
  readonly socket: Socket;
  text = '';
  closed = false;
  private waiters: (() => void)[] = [];

  constructor(port: number, options: RawClientOptions = {}) {
    this.socket = connect({
      port,
      host: options.host ?? '127.0.0.1',
      allowHalfOpen: options.allowHalfOpen ?? false,
      ...(options.localAddress !== undefined ? { localAddress: options.localAddress } : {}),
    });
    this.socket.setEncoding('latin1');
    this.socket.on('data', (d: string) => {
      this.text += d;
      this.wake();
    });
    this.socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    this.socket.on('error', () => undefined);
  }

  send(text: string | Buffer): this {
    if (typeof text === 'string') this.socket.write(text, 'latin1');
    else this.socket.write(text);
    return this;
  }

  /** Resolves once `test` holds for what was received; fails after `timeoutMs` saying what came. */
  async until(test: (r: RawClient) => boolean, timeoutMs = 3000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (!test(this)) {
      if (Date.now() > deadline) throw new Error(`timed out; received so far: ${JSON.stringify(this.text.slice(0, 2000))}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
    return this.text;
  }

  /** Status lines received so far. */
  responses(): number {
    return this.text.split('HTTP/1.1 ').length - 1;
  }

  /** The first response's body (it must be whole, and the only response), chunked or not. */
  body(): string {
    const headEnd = this.text.indexOf('\r\n\r\n');
    const rest = this.text.slice(headEnd + 4);
    if (!/\r\ntransfer-encoding: chunked\r\n/i.test(this.text.slice(0, headEnd + 2))) return rest;
    let out = '';
    for (let at = 0; ;) {
      const eol = rest.indexOf('\r\n', at);
      const size = parseInt(rest.slice(at, eol), 16);
      if (!(size > 0)) return out;
      out += rest.slice(eol + 2, eol + 2 + size);
      at = eol + 2 + size + 2;
    }
  }

  /** The first response's body parsed as JSON. */
  json(): unknown {
    return JSON.parse(this.body());
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }
}
