import { ModelmuxError } from '../../common/errors.js';

/**
 * The SageMaker runtime API's InvokeEndpoint, `POST /endpoints/{EndpointName}/invocations`, as
 * the sagemaker-runtime clients (boto3, the AWS SDKs) send it, in the router's terms:
 *
 * - at the router's root, the endpoint name is a pool's route prefix without its slash
 *   (`/endpoints/wine/invocations` is pool `/wine`'s `POST /invocations`), in local and kube
 *   mode alike;
 * - under a route prefix (`endpoint_url` ending in `/wine`), the call is that pool's, and its
 *   endpoint name must be the prefix's: a name of another pool is refused rather than served by
 *   either, since the client named two pools and would get an answer from one it did not expect.
 *
 * Either way the request goes on as the container-side form (`POST /invocations` with
 * X-Amzn-SageMaker-Target-Model), so router and replica serve one grammar (common/request-grammar.ts).
 */
export type RuntimeTarget =
  /** Not a runtime API call: served as any request. */
  | { kind: 'none' }
  /** A runtime API call, to be served as `url` (the pool's `/invocations`, with the query string). */
  | { kind: 'invoke'; url: string; endpoint: string }
  /** A runtime API call SageMaker would refuse; `url` still names the pool for the access log and metrics. */
  | { kind: 'refused'; url: string; error: ModelmuxError };

const ENDPOINTS = 'endpoints';
const INVOCATIONS = 'invocations';
/** SageMaker's EndpointName: 1 to 63 of letters, digits and inner hyphens. */
const ENDPOINT_NAME = /^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$/;
const NONE: RuntimeTarget = { kind: 'none' };

/** What `method` and the origin-form `url` are in the runtime API. Pure. */
export function runtimeTarget(method: string, url: string): RuntimeTarget {
  if (method !== 'POST') return NONE;
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? '' : url.slice(q);
  const segments = path.split('/');
  // ['', 'endpoints', name, 'invocations'] at the root, ['', prefix, 'endpoints', name, 'invocations'] below one.
  const at = segments.length === 4 ? 1 : segments.length === 5 ? 2 : -1;
  if (at === -1 || segments[at] !== ENDPOINTS || segments[at + 2] !== INVOCATIONS) return NONE;
  const endpoint = segments[at + 1] as string;
  const prefix = at === 1 ? endpoint : (segments[1] as string);
  const url2 = `/${prefix}/${INVOCATIONS}${query}`;
  if (!ENDPOINT_NAME.test(endpoint))
    return { kind: 'refused', url: url2, error: new ModelmuxError('invalid_runtime_request', `"${endpoint}" is not a valid endpoint name: 1 to 63 letters, digits and inner hyphens`) };
  if (endpoint !== prefix) {
    const error = new ModelmuxError(
      'invalid_runtime_request',
      `endpoint "${endpoint}" is not route /${prefix}'s: call /endpoints/${endpoint}/invocations at the router's root, or under the prefix /${endpoint}`,
    );
    return { kind: 'refused', url: url2, error };
  }
  return { kind: 'invoke', url: url2, endpoint };
}

/** SageMaker's bounds on the two opaque headers it forwards: CustomAttributes is at most 1024 ASCII characters, InferenceId 1 to 64 printable ones with no leading space. */
const CUSTOM_ATTRIBUTES = /^[\x20-\x7e]{0,1024}$/;
const INFERENCE_ID = /^[\x21-\x7e][\x20-\x7e]{0,63}$/;

/** Why the runtime call's CustomAttributes or InferenceId header would be refused by SageMaker, if it would. Pure. */
export function runtimeHeaderProblem(customAttributes: string | undefined, inferenceId: string | undefined): string | undefined {
  if (customAttributes !== undefined && !CUSTOM_ATTRIBUTES.test(customAttributes)) return 'X-Amzn-SageMaker-Custom-Attributes is at most 1024 printable ASCII characters';
  if (inferenceId !== undefined && !INFERENCE_ID.test(inferenceId)) return 'X-Amzn-SageMaker-Inference-Id is 1 to 64 printable characters, not starting with a space';
  return undefined;
}
