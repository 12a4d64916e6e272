import { execFile } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { jest } from '@jest/globals';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { identityModel } from '../../helpers/datatype-models.js';
import { modelFolder } from '../../helpers/wine-folder.js';

// Issue 51, part 4: ModelStreamInfer, the V2 service's bidirectional streaming call, is answered
// UNIMPLEMENTED by the router and by a replica, at once and with its reason (ADR 0049), to Triton's
// own streaming client (tritonclient.grpc's start_stream / async_stream_infer).

jest.setTimeout(600_000);

const run = promisify(execFile);

let models: string;
let bin: string;
let replica: ReplicaProcess;
let router: RouterProcess;

/** Triton's streaming client against `address`: the status and message its stream's callback got. */
async function streamInfer(address: string): Promise<{ status: string; message?: string }> {
  const { stdout } = await run(join(bin, 'python'), [join(process.cwd(), 'test/fixtures/triton_grpc_stream.py'), address, 'identity'], { timeout: 60_000 });
  return JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as { status: string; message?: string };
}

beforeAll(async () => {
  // The venv with tritonclient[grpc] (test/tools/install-model-corpus.sh prints its bin folder last).
  const { stdout } = await run('bash', [join(process.cwd(), 'test/tools/install-model-corpus.sh')], { maxBuffer: 16 * 1024 * 1024, timeout: 10 * 60 * 1000 });
  bin = stdout.trim().split('\n').pop() ?? '';
  models = await modelFolder('grpc-stream-infer-', { identity: identityModel('float32') });
  replica = await startReplica({ args: ['--model-source', `file://${models}`] });
  router = await startRouter(['--routes', `/w=${replica.url}?grpc-port=${(replica.grpcAddress ?? '').split(':')[1]}`, '--poll-interval-ms', '200']);
});

afterAll(async () => {
  await router?.stop();
  await replica?.stop();
  await rm(models, { recursive: true, force: true });
});

describe('ModelStreamInfer', () => {
  it.each([
    ['the router', () => router.grpcAddress as string],
    ['a replica', () => replica.grpcAddress as string],
  ])('is answered UNIMPLEMENTED by %s, with the reason, to Triton’s streaming client', async (_who, address) => {
    const a = await streamInfer(address());
    expect(a.status).toBe('StatusCode.UNIMPLEMENTED');
    expect(a.message).toMatch(/ModelStreamInfer .*not served: every model here answers exactly one response per request, so ModelInfer/);
  });
});
