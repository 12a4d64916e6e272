import http from 'node:http';
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { FIELD_MANAGER } from './resources/meta.js';

/**
 * A small REST client over the kubeconfig's credentials. The operator needs server-side
 * apply, merge patches of the status subresource and plain status codes (404, 409, 410),
 * which are direct here and roundabout through the generated typed clients.
 */

export class KubeApiError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = 'KubeApiError';
  }
}

export function isStatus(err: unknown, status: number): boolean {
  return err instanceof KubeApiError && err.status === status;
}

/** The collection path of a resource type, e.g. /apis/apps/v1/namespaces/ml/deployments. */
export function resourcePath(apiVersion: string, plural: string, namespace?: string, name?: string): string {
  const base = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  const ns = namespace !== undefined ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  return `${base}${ns}/${plural}${name !== undefined ? `/${encodeURIComponent(name)}` : ''}`;
}

export interface RequestOptions {
  body?: unknown;
  contentType?: string;
  query?: Record<string, string>;
  /** Milliseconds before the request is abandoned. */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;

export class KubeClient {
  private readonly server: URL;

  constructor(private readonly kc: KubeConfig) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    this.server = new URL(cluster.server);
  }

  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const url = new URL(path, this.server);
    for (const [k, v] of Object.entries(options.query ?? {})) url.searchParams.set(k, v);
    const opts: https.RequestOptions = { method, headers: { accept: 'application/json' } };
    await this.kc.applyToHTTPSOptions(opts);
    const body = options.body === undefined ? undefined : JSON.stringify(options.body);
    const headers: Record<string, string | number> = { ...(opts.headers as Record<string, string>) };
    if (body !== undefined) {
      headers['content-type'] = options.contentType ?? 'application/json';
      headers['content-length'] = Buffer.byteLength(body);
    }
    const lib = url.protocol === 'https:' ? https : http;
    return new Promise<T>((resolve, reject) => {
      const req = lib.request(url, { ...opts, headers, timeout: options.timeoutMs ?? DEFAULT_TIMEOUT_MS }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const status = res.statusCode ?? 0;
          let parsed: unknown;
          try {
            parsed = text === '' ? undefined : JSON.parse(text);
          } catch {
            parsed = undefined;
          }
          if (status >= 200 && status < 300) {
            resolve(parsed as T);
            return;
          }
          const s = (parsed ?? {}) as { reason?: string; message?: string };
          reject(new KubeApiError(status, s.reason ?? 'Unknown', `${method} ${url.pathname}: ${status} ${s.message ?? text.slice(0, 200)}`));
        });
      });
      req.on('timeout', () => req.destroy(new Error(`${method} ${url.pathname}: timed out`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  get<T>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  /** The object, or undefined when it does not exist. */
  async find<T>(path: string): Promise<T | undefined> {
    try {
      return await this.get<T>(path);
    } catch (err) {
      if (isStatus(err, 404)) return undefined;
      throw err;
    }
  }

  /** Server-side apply: creates or converges the fields this operator manages, in one call. */
  apply<T>(path: string, obj: unknown): Promise<T> {
    return this.request<T>('PATCH', path, {
      body: obj,
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager: FIELD_MANAGER, force: 'true' },
    });
  }

  mergePatch<T>(path: string, patch: unknown): Promise<T> {
    return this.request<T>('PATCH', path, { body: patch, contentType: 'application/merge-patch+json' });
  }

  create<T>(path: string, obj: unknown): Promise<T> {
    return this.request<T>('POST', path, { body: obj });
  }

  replace<T>(path: string, obj: unknown): Promise<T> {
    return this.request<T>('PUT', path, { body: obj });
  }

  /** Deletes; an object already gone is not an error. */
  async delete(path: string): Promise<void> {
    try {
      await this.request('DELETE', path, { body: { propagationPolicy: 'Background' } });
    } catch (err) {
      if (!isStatus(err, 404)) throw err;
    }
  }
}
