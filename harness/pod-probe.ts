import { connect } from 'node:net';
import type { V1Container, V1Probe } from '@kubernetes/client-node';

/**
 * One run of a readiness probe against the pod's address, as a kubelet runs it: httpGet
 * succeeds on 200–399, tcpSocket on a connection; a named port is looked up in the
 * container's ports. exec probes need the image, which the node agent ignores: they pass.
 */
export async function runProbe(container: V1Container, p: V1Probe, address: string): Promise<boolean> {
  const get = p.httpGet;
  const tcp = p.tcpSocket;
  const portOf = (port: number | string | undefined): number | undefined =>
    typeof port === 'number' ? port : ((container.ports ?? []).find((cp) => cp.name === port)?.containerPort ?? (port !== undefined && /^\d+$/.test(port) ? Number(port) : undefined));
  const timeout = AbortSignal.timeout((p.timeoutSeconds ?? 1) * 1000);
  try {
    if (get) {
      const port = portOf(get.port);
      if (port === undefined) return false;
      const headers = Object.fromEntries((get.httpHeaders ?? []).map((h) => [h.name, h.value]));
      const res = await fetch(`${(get.scheme ?? 'HTTP').toLowerCase()}://${get.host ?? address}:${port}${get.path ?? '/'}`, { headers, signal: timeout });
      await res.arrayBuffer();
      return res.status >= 200 && res.status < 400;
    }
    if (tcp) {
      const port = portOf(tcp.port);
      if (port === undefined) return false;
      return await new Promise<boolean>((resolve) => {
        const s = connect({ host: address, port, timeout: 1000 }, () => {
          s.destroy();
          resolve(true);
        });
        s.on('error', () => resolve(false));
        s.on('timeout', () => {
          s.destroy();
          resolve(false);
        });
      });
    }
    // exec probes cannot run without a container image: count them as passing.
    return true;
  } catch {
    return false;
  }
}
