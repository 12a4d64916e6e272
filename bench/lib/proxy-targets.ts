import { pathToFileURL } from 'node:url';
import { startChild, type Child } from './child.js';
import { waitHttpReady } from './http-ready.js';

/** The proxy benchmarks' one route: the router serves it from a static replica list. */
export const ROUTE = '/wine';

/** Where a router started by startBenchRouter on `port` serves ROUTE. */
export function routerUrl(port: number): string {
  return `http://127.0.0.1:${port}${ROUTE}/`;
}

/** A `modelmux replica` of `cli` serving the model files of `modelDir`, ready when this resolves. */
export async function startBenchReplica(cli: string, modelDir: string, port: number): Promise<Child> {
  const replica = await startChild(
    process.execPath,
    [cli, 'replica', '--host', '127.0.0.1', '--port', String(port), '--model-source', pathToFileURL(modelDir).href, '--max-models', '4', '--max-ongoing-requests', '1024'],
    { readyTimeoutMs: 60_000 },
  );
  try {
    await waitHttpReady(`http://127.0.0.1:${port}/v2/health/ready`, 60_000, replica);
  } catch (err) {
    await replica.stop(10_000);
    throw err;
  }
  return replica;
}

/** `modelmux router --discovery static` of `cli` with ROUTE on one replica, ready when this resolves. */
export async function startBenchRouter(cli: string, port: number, replicaUrl: string, extra: readonly string[] = []): Promise<Child> {
  const router = await startChild(
    process.execPath,
    [
      cli,
      'router',
      '--discovery',
      'static',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--grpc-port',
      '0',
      '--admin-port',
      '0',
      '--routes',
      `${ROUTE}=${replicaUrl}`,
      '--max-ongoing-requests',
      '1024',
      ...extra,
    ],
    { readyTimeoutMs: 60_000 },
  );
  try {
    await waitHttpReady(`http://127.0.0.1:${port}/readyz`, 60_000, router);
  } catch (err) {
    await router.stop(10_000);
    throw err;
  }
  return router;
}
