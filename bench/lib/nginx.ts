import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startChild, type Child } from './child.js';
import { waitHttpReady } from './http-ready.js';

/**
 * Debian's nginx as the reference reverse proxy: one worker (the router is one process too, and
 * throughput per core is compared from measured CPU time anyway), HTTP/1.1 keep-alive to the
 * upstream, no access log, everything under a private prefix and in the foreground.
 */
export interface Nginx {
  url: string;
  child: Child;
  stop(): Promise<void>;
}

export const NGINX_BINARY = process.env.MODELMUX_BENCH_NGINX ?? '/usr/sbin/nginx';

export function nginxConfig(prefix: string, port: number, routePrefix: string, upstream: string, workers: number): string {
  return `worker_processes ${workers};
pid ${join(prefix, 'nginx.pid')};
error_log ${join(prefix, 'error.log')} warn;
daemon off;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${join(prefix, 'body')};
  proxy_temp_path ${join(prefix, 'proxy')};
  fastcgi_temp_path ${join(prefix, 'fastcgi')};
  uwsgi_temp_path ${join(prefix, 'uwsgi')};
  scgi_temp_path ${join(prefix, 'scgi')};
  client_max_body_size 8m;
  upstream replica {
    server ${upstream};
    keepalive 64;
  }
  server {
    listen 127.0.0.1:${port};
    # serve_multiplexed_model_id has underscores: nginx drops such headers unless told not to.
    underscores_in_headers on;
    location ${routePrefix}/ {
      proxy_pass http://replica/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering on;
    }
    location = /healthz { return 200 "ok\\n"; }
  }
}
`;
}

export async function startNginx(prefix: string, port: number, routePrefix: string, upstreamHostPort: string, workers = 1): Promise<Nginx> {
  await mkdir(prefix, { recursive: true });
  const conf = join(prefix, 'nginx.conf');
  await writeFile(conf, nginxConfig(prefix, port, routePrefix, upstreamHostPort, workers));
  const child = await startChild(NGINX_BINARY, ['-p', prefix, '-c', conf], { readyTimeoutMs: 10_000 });
  await waitHttpReady(`http://127.0.0.1:${port}/healthz`, 10_000, child);
  return { url: `http://127.0.0.1:${port}${routePrefix}/`, child, stop: () => child.stop(10_000) };
}
