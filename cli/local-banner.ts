import { HEADER_RAY_MODEL_ID } from '../common/names.js';
import { SAMPLE_WINE, WINE_FEATURES, WINE_INPUT, WINE_OUTPUT } from '../common/wine-model.js';
import type { BackoffPolicy } from './local-backoff.js';

/**
 * What `modelmux local` prints once the pool is up: where to send requests and one working
 * curl command per request form. Pure, so the wording can be checked without processes.
 */

export interface BannerInput {
  /** Router base URL without a trailing slash, e.g. http://127.0.0.1:8000. */
  routerUrl: string;
  /** The router's gRPC `host:port`, unless it serves none. */
  routerGrpc?: string | undefined;
  /** The router's admin port's base URL (/metrics, /routes, the repository API), unless it has none. */
  adminUrl?: string | undefined;
  routePrefix: string;
  /** Each replica's own URL: requests work against a replica directly too, without the prefix. */
  replicaUrls: readonly string[];
  maxModels: number;
  modelSource: string;
  /** Ids to show in the examples: three different models, so the pool's routing shows. */
  exampleIds: readonly [string, string, string];
  exampleModelCount: number;
  /** How local mode restarts a process that dies. */
  restart: BackoffPolicy;
}

/** The header as SageMaker documents it; header names are case-insensitive on the wire. */
const SAGEMAKER_HEADER = 'X-Amzn-SageMaker-Target-Model';

const seconds = (ms: number): string => String(ms / 1000);

const quote = (s: string): string => `'${s.replaceAll("'", `'\\''`)}'`;

export function v2Body(): string {
  return JSON.stringify({ inputs: [{ name: WINE_INPUT, shape: [1, WINE_FEATURES], datatype: 'FP32', data: SAMPLE_WINE }] });
}

export function rowsBody(): string {
  return JSON.stringify({ instances: [SAMPLE_WINE] });
}

/** The three request forms as curl command lines (one line each, POSIX-shell quoted). */
export function curlCommands(b: Pick<BannerInput, 'routerUrl' | 'routePrefix' | 'exampleIds'>): { v2: string; ray: string; sagemaker: string } {
  const base = `${b.routerUrl}${b.routePrefix}`;
  const [a, c, d] = b.exampleIds;
  const json = `-H ${quote('Content-Type: application/json')}`;
  return {
    v2: `curl -sS ${quote(`${base}/v2/models/${a}/infer`)} ${json} -d ${quote(v2Body())}`,
    ray: `curl -sS ${quote(`${base}/`)} -H ${quote(`${HEADER_RAY_MODEL_ID}: ${c}`)} ${json} -d ${quote(rowsBody())}`,
    sagemaker: `curl -sS ${quote(`${base}/invocations`)} -H ${quote(`${SAGEMAKER_HEADER}: ${d}`)} ${json} -d ${quote(rowsBody())}`,
  };
}

/**
 * A Triton gRPC client (`pip install 'tritonclient[grpc]'`) calling ModelInfer on the router's
 * gRPC port: one POSIX-shell line. The router has one route, so the call needs no route metadata.
 */
export function tritonGrpcCommand(grpc: string, modelId: string): string {
  const script = [
    'import numpy as np, tritonclient.grpc as g',
    `c = g.InferenceServerClient(${JSON.stringify(grpc)})`,
    `x = g.InferInput(${JSON.stringify(WINE_INPUT)}, [1, ${WINE_FEATURES}], "FP32")`,
    `x.set_data_from_numpy(np.array([[${SAMPLE_WINE.join(', ')}]], dtype=np.float32))`,
    `print(c.infer(${JSON.stringify(modelId)}, [x]).as_numpy(${JSON.stringify(WINE_OUTPUT)}))`,
  ].join('; ');
  return `python3 -c ${quote(script)}`;
}

/**
 * boto3's sagemaker-runtime client (`pip install boto3`) calling InvokeEndpoint at the router's
 * root, the endpoint name being the route prefix: one POSIX-shell line. The credentials are dummies:
 * the router accepts a SigV4 signature without checking it (docs/sagemaker.md).
 */
export function boto3Command(routerUrl: string, routePrefix: string, modelId: string): string {
  const script = [
    'import boto3, json',
    `r = boto3.client("sagemaker-runtime", endpoint_url=${JSON.stringify(routerUrl)}, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")`,
    `a = r.invoke_endpoint(EndpointName=${JSON.stringify(routePrefix.slice(1))}, TargetModel=${JSON.stringify(modelId)}, ContentType="application/json", Body=json.dumps(${rowsBody()}))`,
    'print(a["Body"].read().decode())',
  ].join('; ');
  return `python3 -c ${quote(script)}`;
}

export function bannerText(b: BannerInput): string {
  const cmds = curlCommands(b);
  const grpc =
    b.routerGrpc === undefined
      ? []
      : [`Open Inference Protocol over gRPC on ${b.routerGrpc} (Triton's client, pip install 'tritonclient[grpc]'; docs/grpc.md):`, `  ${tritonGrpcCommand(b.routerGrpc, b.exampleIds[1])}`, ''];
  const models = b.exampleModelCount > 0 ? `${b.exampleModelCount} example models (${b.exampleIds[0]} … ) from ${b.modelSource}` : `models from ${b.modelSource}`;
  return [
    '',
    `modelmux local is up: ${b.replicaUrls.length} replica${b.replicaUrls.length === 1 ? '' : 's'} (up to ${b.maxModels} loaded models each) behind one router,`,
    `serving ${models}.`,
    '',
    `  route    ${b.routerUrl}${b.routePrefix}`,
    ...(b.routerGrpc === undefined ? [] : [`  grpc     ${b.routerGrpc}`]),
    ...(b.adminUrl === undefined ? [] : [`  metrics  ${b.adminUrl}/metrics`, `  admin    ${b.adminUrl} (/routes, the model repository API; docs/requests.md)`]),
    `  replicas ${b.replicaUrls.join(' ')}`,
    '',
    'Open Inference Protocol (KServe V2):',
    `  ${cmds.v2}`,
    '',
    `Ray Serve style (model id in the ${HEADER_RAY_MODEL_ID} header):`,
    `  ${cmds.ray}`,
    '',
    `SageMaker multi-model style (model id in the ${SAGEMAKER_HEADER} header):`,
    `  ${cmds.sagemaker}`,
    '',
    ...grpc,
    "SageMaker runtime API (boto3's invoke_endpoint, pip install boto3; docs/sagemaker.md):",
    `  ${boto3Command(b.routerUrl, b.routePrefix, b.exampleIds[2])}`,
    '',
    `A replica or the router that dies is restarted after ${seconds(b.restart.initialMs)} s, doubling to ${seconds(b.restart.maxMs)} s while it keeps dying;`,
    'the router serves from the other replicas meanwhile. Press Ctrl-C to stop.',
    '',
  ].join('\n');
}
