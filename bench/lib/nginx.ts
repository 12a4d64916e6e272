import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startChild, type Child } from './child.js';
import { childPids } from './proc-cpu.js';
import { waitHttpReady } from './http-ready.js';

/**
 * Debian's nginx as the reference reverse proxy: one worker (the router is one process too, and
 * throughput per core is compared from measured CPU time anyway), HTTP/1.1 keep-alive to the
 * upstream, everything under a private prefix and in the foreground. Plain, it does less per
 * request than the router: no access log, no request id, no X-Forwarded-For. With `routerWork`
 * it does what the router does for every request as well: a JSON access log line (buffered up
 * to 64 KB or 50 ms, the router's batching: common/line-batch.ts), a request id sent to the
 * replica and back to the client, and X-Forwarded-For.
 */
export interface Nginx {
  url: string;
  child: Child;
  /** The master and its workers: the processes whose CPU is nginx's. */
  pids: () => Promise<number[]>;
  stop(): Promise<void>;
}

export const NGINX_BINARY = process.env.MODELMUX_BENCH_NGINX ?? '/usr/sbin/nginx';

/** The router's access log line (router/exchange/access-log.ts) as far as nginx has its fields; nginx times in seconds. */
function routerLikeLogFormat(routePrefix: string): string {
  return (
    `'{"time":"$time_iso8601","level":"info","msg":"request","component":"nginx","requestId":"$request_id","method":"$request_method",` +
    `"path":"$uri","route":"${routePrefix}","model":"$http_serve_multiplexed_model_id","replica":"$upstream_addr","status":$status,"durationS":$request_time}'`
  );
}

export function nginxConfig(prefix: string, port: number, routePrefix: string, upstream: string, workers: number, routerWork = false): string {
  const log = routerWork ? `log_format modelmux escape=json ${routerLikeLogFormat(routePrefix)};\n  access_log ${join(prefix, 'access.log')} modelmux buffer=64k flush=50ms;` : 'access_log off;';
  const headers = routerWork
    ? `
      proxy_set_header X-Request-Id $request_id;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      # The replica echoes the id it was sent: one copy to the client, as the router sends.
      proxy_hide_header X-Request-Id;
      add_header X-Request-Id $request_id always;`
    : '';
  return `worker_processes ${workers};
pid ${join(prefix, 'nginx.pid')};
error_log ${join(prefix, 'error.log')} warn;
daemon off;
events { worker_connections 4096; }
http {
  ${log}
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
      proxy_buffering on;${headers}
    }
    location = /healthz { return 200 "ok\\n"; }
  }
}
`;
}

export async function startNginx(prefix: string, port: number, routePrefix: string, upstreamHostPort: string, workers = 1, routerWork = false): Promise<Nginx> {
  await mkdir(prefix, { recursive: true });
  const conf = join(prefix, 'nginx.conf');
  await writeFile(conf, nginxConfig(prefix, port, routePrefix, upstreamHostPort, workers, routerWork));
  const child = await startChild(NGINX_BINARY, ['-p', prefix, '-c', conf], { readyTimeoutMs: 10_000 });
  await waitHttpReady(`http://127.0.0.1:${port}/healthz`, 10_000, child);
  return { url: `http://127.0.0.1:${port}${routePrefix}/`, child, pids: async () => [child.pid, ...(await childPids(child.pid))], stop: () => child.stop(10_000) };
}
