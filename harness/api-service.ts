import { issueCertificate, type CertificateAuthority, type KeyPair } from './certs.js';
import type { ControlPlane } from './control-plane.js';
import { eventually } from './eventually.js';
import { getJson } from './kube-json.js';

/**
 * An extension API server (a metrics adapter run as a process) put behind the test control
 * plane's aggregation layer, as its manifests do in a cluster: a Service and one APIService per
 * group. The Service is an ExternalName one naming `localhost`, which the aggregator dials as
 * is: this control plane has no kube-proxy to route a cluster IP, and Endpoints refuse loopback
 * addresses. The aggregator reaches it with the front-proxy client certificate the control plane
 * sets up; the server learns that CA from kube-system/extension-apiserver-authentication.
 */
export interface AggregatedServer {
  readonly service: string;
  readonly namespace: string;
  /** Its HTTPS port on 127.0.0.1. */
  readonly port: number;
  /** The CA that signed its serving certificate (the APIServices' caBundle). */
  readonly ca: CertificateAuthority;
  /** API groups it serves at v1beta1, e.g. custom.metrics.k8s.io. */
  readonly groups: readonly string[];
}

interface ApiServiceStatus {
  status?: { conditions?: { type: string; status: string; message?: string }[] };
}

const apiServiceName = (group: string): string => `v1beta1.${group}`;

/** A serving certificate for `<service>.<namespace>.svc`, the name the aggregator checks, and loopback. */
export function issueAggregatedServingCertificate(dir: string, ca: CertificateAuthority, service: string, namespace: string): Promise<KeyPair> {
  return issueCertificate(dir, ca, { name: 'serving', commonName: service, usage: 'server', altNames: [`DNS:${service}.${namespace}.svc`, 'DNS:localhost', 'IP:127.0.0.1'] });
}

/**
 * The flags every extension API server built on k8s.io/apiserver takes here: HTTPS on loopback
 * with `serving`, and the API server reached with `kubeconfig` for its listers, its delegated
 * authentication (the front-proxy CA) and authorisation.
 */
export function aggregatedServerArgs(port: number, serving: KeyPair, certDir: string, kubeconfig: string): string[] {
  return [
    '--bind-address=127.0.0.1',
    `--secure-port=${port}`,
    `--tls-cert-file=${serving.certFile}`,
    `--tls-private-key-file=${serving.keyFile}`,
    `--cert-dir=${certDir}`,
    `--lister-kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
  ];
}

/**
 * Applies the Service and APIServices and resolves once every APIService is Available: the
 * aggregator has reached the server through TLS. `failed` says why to stop waiting early (the
 * server exited), or undefined.
 */
export async function registerAggregatedServer(cp: ControlPlane, s: AggregatedServer, failed: () => string | undefined): Promise<void> {
  const caBundle = Buffer.from(s.ca.certPem).toString('base64');
  const apiServices = s.groups.map(
    (group) => `---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: { name: ${apiServiceName(group)} }
spec:
  service: { name: ${s.service}, namespace: ${s.namespace}, port: ${s.port} }
  group: ${group}
  version: v1beta1
  caBundle: ${caBundle}
  groupPriorityMinimum: 100
  versionPriority: 100
`,
  );
  await cp.kubectl(['apply', '-f', '-'], {
    input: `apiVersion: v1
kind: Service
metadata: { name: ${s.service}, namespace: ${s.namespace} }
spec: { type: ExternalName, externalName: localhost }
${apiServices.join('')}`,
  });
  await eventually(
    async () => {
      const why = failed();
      if (why !== undefined) throw new Error(why);
      for (const group of s.groups) {
        const svc = await getJson<ApiServiceStatus>(cp, ['apiservice', apiServiceName(group)]);
        const available = svc?.status?.conditions?.find((c) => c.type === 'Available');
        if (available?.status !== 'True') throw new Error(`APIService ${apiServiceName(group)} not Available: ${available?.message ?? 'no condition yet'}`);
      }
    },
    90_000,
    500,
  );
}

/** Removes the APIServices (the control plane stays usable without them); never throws. */
export async function unregisterAggregatedServer(cp: ControlPlane, groups: readonly string[]): Promise<void> {
  await cp.kubectl(['delete', 'apiservice', ...groups.map(apiServiceName), '--ignore-not-found', '--wait=false']).catch(() => undefined);
}
