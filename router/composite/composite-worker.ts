import { parentPort } from 'node:worker_threads';
import { CompositeCodec } from './composite-codec.js';
import { runTask, type CodecTask } from './composite-workers.js';

/** A composite worker thread (composite-workers.ts): runs each task it is sent on its one codec, in order. */
const codec = new CompositeCodec();
const port = parentPort;
if (port === null) throw new Error('composite-worker.js runs as a worker thread of the router');
port.on('message', (task: CodecTask) => {
  const { reply, transfer } = runTask(codec, task);
  port.postMessage(reply, transfer);
});
