import { execFileSync } from 'node:child_process';
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

/**
 * The flags `cli`'s router takes that an older build may not (bench:router-ab's B can be any
 * earlier commit): its admin port, moved off the router's own 8002 so that routers side by side
 * do not collide, only where the build has one (issue 47 gave the router its admin port).
 */
function optionalFlags(cli: string): string[] {
  const help = execFileSync(process.execPath, [cli, 'router', '--help'], { encoding: 'utf8' });
  return help.includes('--admin-port') ? ['--admin-port', '0'] : [];
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
      ...optionalFlags(cli),
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
