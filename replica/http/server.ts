import { randomUUID } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { ModelmuxError, refusedBeforeWork, toModelmuxError, type ErrorBody } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import type { ModelId } from '../../common/model-id.js';
import { HEADER_CACHE, HEADER_OVERLOADED, HEADER_REPLICA, HEADER_REQUEST_ID, HEADER_TABLE_VERSION } from '../../common/names.js';
import { matchRequest, requestModel, requestNotFound } from '../../common/request-grammar.js';
import { acceptedRequestId } from '../../common/request-id.js';
import { parseJsonBody } from '../../common/json-body.js';
import { repositoryIndex } from '../cache/repository-index.js';
import type { ReplicaMetrics } from '../metrics.js';
import type { ServingBackend } from '../serving/serving-backend.js';
import { HEADER_INFERENCE_HEADER_LENGTH } from './body-layout.js';
import { bodyHold, inferenceBody } from './body-reader.js';

/** Tests only (with MODELMUX_TEST_HOOKS): hold the model this many ms before running. */
export const HEADER_TEST_DELAY = 'x-modelmux-test-delay-ms';

export interface ServerOptions {
  service: ServingBackend;
  metrics: ReplicaMetrics;
  log: Logger;
  /** Read per response: it may only be known once listening (host:port). */
  replicaName: () => string;
  maxOngoingRequests: number;
  maxBodyBytes: number;
  testHooks: boolean;
  /** Called for every answered inference request (feeds the deletion cost). */
  onServed: () => void;
}

type Form = 'v2' | 'ray' | 'sagemaker';

interface Locals {
  requestId: string;
  startedAt: number;
  /** The request's model id by the request grammar; set on every route that names a model. */
  model: ModelId | undefined;
}

/** The replica's HTTP API. Every error is a catalogue code in JSON; nothing escapes a handler. */
export function createReplicaApp(opts: ServerOptions): { app: express.Express; state: { shuttingDown: boolean; ongoing: number } } {
  const { service, metrics, log } = opts;
  const state = { shuttingDown: false, ongoing: 0 };
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  // The request grammar (common/request-grammar.ts) admits only exact paths; so does the route table.
  app.set('case sensitive routing', true);
  app.set('strict routing', true);

  const locals = (res: Response): Locals => res.locals as Locals;

  app.use((req, res, next) => {
    const given = req.get(HEADER_REQUEST_ID);
    const requestId = acceptedRequestId(given) ?? randomUUID();
    Object.assign(res.locals, { requestId, startedAt: performance.now(), model: undefined } satisfies Locals);
    res.setHeader(HEADER_REQUEST_ID, requestId);
    res.setHeader(HEADER_REPLICA, opts.replicaName());
    next();
  });

  const send = (res: Response, status: number, body: unknown): void => {
    if (res.headersSent) return;
    res.setHeader(HEADER_TABLE_VERSION, String(service.cache.version));
    res.status(status).json(body);
  };

  const fail = (res: Response, err: unknown): void => {
    const e = toModelmuxError(err);
    const body: ErrorBody = { error: e.code, message: e.message, requestId: locals(res).requestId };
    if (e.code === 'internal') log.error('unexpected error', { requestId: body.requestId, reason: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    // Refused before any work: a router may send the request to another replica.
    if (refusedBeforeWork(e.code)) res.setHeader(HEADER_OVERLOADED, 'true');
    send(res, e.status, body);
  };

  // The router reads requests by the same grammar: what it refuses, this refuses alike, and the
  // model it placed a request for is the model served here.
  app.use((req, res, next) => {
    const q = req.url.indexOf('?');
    const path = q === -1 ? req.url : req.url.slice(0, q);
    const match = matchRequest(req.method, path);
    if (match === undefined) return fail(res, requestNotFound(req.method, path));
    try {
      locals(res).model = requestModel(match, req.headers);
    } catch (err) {
      if (match.form !== 'other') metrics.requests.inc({ form: match.form, code: String(toModelmuxError(err).status) });
      return fail(res, err);
    }
    next();
  });
  const modelOf = (res: Response): ModelId => locals(res).model as ModelId;

  /** Refuses at once past maxOngoingRequests, before reading the body, so a router can go elsewhere. */
  const admit =
    (form: Form) =>
    (_req: Request, res: Response, next: NextFunction): void => {
      if (state.shuttingDown) {
        metrics.requests.inc({ form, code: '503' });
        fail(res, new ModelmuxError('shutting_down', 'the replica is shutting down'));
        return;
      }
      if (state.ongoing >= opts.maxOngoingRequests) {
        metrics.rejected.inc();
        metrics.requests.inc({ form, code: '503' });
        fail(res, new ModelmuxError('overloaded', `the replica is at its limit of ${opts.maxOngoingRequests} ongoing requests`));
        return;
      }
      state.ongoing++;
      metrics.ongoing.set(state.ongoing);
      let counted = true;
      const end = (): void => {
        if (!counted) return;
        counted = false;
        state.ongoing--;
        metrics.ongoing.set(state.ongoing);
        metrics.requests.inc({ form, code: String(res.statusCode) });
        metrics.requestDuration.observe({ form }, (performance.now() - locals(res).startedAt) / 1000);
      };
      res.once('finish', end);
      res.once('close', end);
      next();
    };

  // Raw bytes: the body is JSON, or JSON followed by binary tensor data when the request carries
  // Inference-Header-Content-Length (the V2 binary extension tritonclient uses by default). An
  // inference body is read into memory its tensors are then views of (body-reader.ts).
  const raw = express.raw({ limit: opts.maxBodyBytes, type: () => true });
  const inferBody = inferenceBody(opts.maxBodyBytes);

  const readBody = (req: Request): { json: unknown; binary: Uint8Array } => {
    const buf: unknown = req.body;
    if (!Buffer.isBuffer(buf) || buf.length === 0) throw new ModelmuxError('invalid_request', 'the request has no body');
    const header = req.get(HEADER_INFERENCE_HEADER_LENGTH);
    let jsonLength = buf.length;
    if (header !== undefined) {
      jsonLength = Number(header);
      if (!Number.isInteger(jsonLength) || jsonLength < 0 || jsonLength > buf.length) {
        throw new ModelmuxError('invalid_request', `${HEADER_INFERENCE_HEADER_LENGTH} is not a length within the body`);
      }
    }
    return { json: parseJsonBody(buf.subarray(0, jsonLength)), binary: buf.subarray(jsonLength) };
  };

  /** The JSON, then each binary output from its own memory: no copy into one buffer. */
  const sendBinary = (res: Response, json: unknown, parts: readonly Uint8Array[]): void => {
    const head = Buffer.from(JSON.stringify(json));
    res.setHeader(HEADER_TABLE_VERSION, String(service.cache.version));
    res.setHeader(HEADER_INFERENCE_HEADER_LENGTH, String(head.length));
    res.setHeader('content-length', String(parts.reduce((n, p) => n + p.length, head.length)));
    res.status(200).type('application/octet-stream');
    res.write(head);
    for (const p of parts) res.write(p);
    res.end();
  };

  const infer = async (req: Request, res: Response): Promise<void> => {
    // The run may outlive its deadline, reading the body's tensors still: that body is not reused.
    let reusable = true;
    try {
      const id = modelOf(res);
      const { json, binary } = readBody(req);
      let hold = 0;
      if (opts.testHooks) hold = Math.max(0, Math.min(600_000, Number(req.get(HEADER_TEST_DELAY) ?? 0) || 0));
      const outcome = await service.infer(id, json, binary, hold);
      opts.onServed();
      res.setHeader(HEADER_CACHE, outcome.hit ? 'hit' : 'miss');
      const { binary: parts } = outcome.body;
      if (parts === undefined) send(res, 200, outcome.body.json);
      else sendBinary(res, outcome.body.json, parts);
    } catch (err) {
      reusable = toModelmuxError(err).code !== 'timeout';
      fail(res, err);
    } finally {
      bodyHold(res).settled(reusable);
    }
  };

  app.get('/v2/health/live', (_req, res) => send(res, 200, { live: true }));
  app.get('/v2/health/ready', (_req, res) => {
    if (state.shuttingDown) fail(res, new ModelmuxError('shutting_down', 'the replica is shutting down'));
    else if (!service.ready()) fail(res, new ModelmuxError('runtime_unavailable', 'the serving runtime beside the replica is not ready'));
    else send(res, 200, { ready: true });
  });
  // Extensions by Triton's names: the binary tensor data extension is read and written here.
  app.get('/v2', (_req, res) => send(res, 200, { name: 'modelmux-replica', version: '1', extensions: ['binary_tensor_data', 'model_repository'] }));
  app.get('/models', (_req, res) => send(res, 200, service.table()));
  app.get('/metrics', async (_req, res) => {
    try {
      res.setHeader('content-type', metrics.registry.contentType);
      res.status(200).send(await metrics.registry.metrics());
    } catch (err) {
      fail(res, err);
    }
  });

  app.get(['/v2/models/:id/ready', '/v2/models/:id/versions/:version/ready'], (_req, res) => {
    const id = modelOf(res);
    const ready = service.cache.has(id);
    send(res, ready ? 200 : 503, { name: id, ready });
  });
  app.get(['/v2/models/:id', '/v2/models/:id/versions/:version'], admit('v2'), async (_req, res) => {
    try {
      const id = modelOf(res);
      const { body, hit } = await service.metadata(id);
      res.setHeader(HEADER_CACHE, hit ? 'hit' : 'miss');
      send(res, 200, body);
    } catch (err) {
      fail(res, err);
    }
  });
  app.post(['/v2/models/:id/infer', '/v2/models/:id/versions/:version/infer'], admit('v2'), inferBody, infer);
  // The model repository extension: pre-warm a model (loaded as a request would load it) and drain one.
  app.post('/v2/repository/index', raw, (req, res) => {
    try {
      const buf: unknown = req.body;
      const body = Buffer.isBuffer(buf) && buf.length > 0 ? parseJsonBody(buf) : undefined;
      send(res, 200, repositoryIndex(service.table(), body));
    } catch (err) {
      fail(res, err);
    }
  });
  app.post('/v2/repository/models/:id/load', admit('v2'), async (_req, res) => {
    try {
      const { hit } = await service.metadata(modelOf(res));
      res.setHeader(HEADER_CACHE, hit ? 'hit' : 'miss');
      send(res, 200, {});
    } catch (err) {
      fail(res, err);
    }
  });
  // Requests holding the model finish on it; it is released after them.
  app.post('/v2/repository/models/:id/unload', (_req, res) => {
    service.cache.evict(modelOf(res));
    send(res, 200, {});
  });
  app.post('/', admit('ray'), inferBody, infer);
  app.post('/invocations', admit('sagemaker'), inferBody, infer);

  app.use((_req, res) => fail(res, new ModelmuxError('not_found', 'no such path')));
  // Body-parser and any other thrown error: always a catalogue code, never a stack to the client.
  // eslint-disable-next-line @typescript-eslint/no-unused-vars -- Express knows an error handler by its four parameters.
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const type = (err as { type?: unknown }).type;
    if (type === 'entity.too.large') fail(res, new ModelmuxError('body_too_large', `the body is larger than ${opts.maxBodyBytes} bytes`));
    else if (type === 'entity.parse.failed') fail(res, new ModelmuxError('invalid_request', 'the body is not valid JSON'));
    else if (typeof type === 'string' || (err as { status?: unknown }).status === 400) fail(res, new ModelmuxError('invalid_request', err instanceof Error ? err.message : 'bad request'));
    else fail(res, err);
  });
  return { app, state };
}
