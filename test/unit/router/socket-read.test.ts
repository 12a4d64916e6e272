import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { readBytes, readIntoSharedBuffer } from '../../../router/socket-read.js';

/** A server whose accepted sockets are given to `accept` in its `connection` event. */
async function serve(accept: (socket: Socket) => void): Promise<{ server: Server; port: number }> {
  const server = createServer(accept);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('readIntoSharedBuffer', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
  });

  it("reads an accepted socket into the shared buffer on this Node, with no data events, and still ends it", async () => {
    const got: string[] = [];
    const events: string[] = [];
    const results: boolean[] = [];
    const ended = new Promise<void>((resolve) => {
      void serve((socket) => {
        const onRead = (bytes: number): boolean => {
          got.push(readBytes(bytes).toString('latin1'));
          return true;
        };
        results.push(readIntoSharedBuffer(socket, onRead));
        // The slots are taken: a second reader is refused rather than replacing the first.
        results.push(readIntoSharedBuffer(socket, () => true));
        socket.on('data', () => void events.push('data'));
        socket.on('end', () => {
          events.push('end');
          socket.end();
          resolve();
        });
      }).then(({ server, port }) => {
        servers.push(server);
        const c = connect(port, '127.0.0.1');
        c.write('hello ');
        setTimeout(() => c.end('world'), 30);
      });
    });
    await ended;
    expect(results).toEqual([true, false]);
    expect(got.join('')).toBe('hello world');
    expect(events).toEqual(['end']);
  });

  it('stops reading when the callback returns false, until the socket is resumed', async () => {
    const got: string[] = [];
    let accepted: Socket | undefined;
    const { server, port } = await serve((socket) => {
      accepted = socket;
      readIntoSharedBuffer(socket, (bytes) => {
        got.push(readBytes(bytes).toString('latin1'));
        return false;
      });
    });
    servers.push(server);
    const c = connect(port, '127.0.0.1');
    c.write('one');
    await sleep(50);
    c.write('two');
    await sleep(50);
    expect(got).toEqual(['one']);
    accepted?.resume();
    await sleep(50);
    expect(got).toEqual(['one', 'two']);
    c.destroy();
    accepted?.destroy();
  });
});
