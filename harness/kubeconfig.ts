import { readFile, writeFile } from 'node:fs/promises';
import { type AuthenticationV1TokenRequest, CoreV1Api, KubeConfig } from '@kubernetes/client-node';

/** Who a kubeconfig speaks as: a client certificate (PEM files) or a bearer token. */
export type KubeUser = { readonly certFile: string; readonly keyFile: string } | { readonly token: string };

const b64 = (s: string): string => Buffer.from(s).toString('base64');

/**
 * Writes a self-contained kubeconfig (certificates embedded, not referenced), so the file can
 * be handed to any process — kubectl, helm, the operator, a pod run by the node agent — and
 * stays valid after the files it was made from are gone. JSON is valid YAML.
 */
export async function writeKubeconfig(path: string, server: string, caPem: string, user: KubeUser, name = 'modelmux-test'): Promise<void> {
  const userEntry = 'token' in user ? { token: user.token } : { 'client-certificate-data': b64(await readFile(user.certFile, 'utf8')), 'client-key-data': b64(await readFile(user.keyFile, 'utf8')) };
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server, 'certificate-authority-data': b64(caPem) } }],
    users: [{ name, user: userEntry }],
    contexts: [{ name, context: { cluster: name, user: name, namespace: 'default' } }],
    'current-context': name,
  };
  await writeFile(path, JSON.stringify(config, null, 2) + '\n', { mode: 0o600 });
}

export function loadKubeConfig(path: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}

export interface TokenOptions {
  /** Binds the token to a pod, as the kubelet does: it dies with the pod. Required for node credentials. */
  readonly boundPod?: { readonly name: string; readonly uid: string };
  readonly expirationSeconds?: number;
}

/** A service account token from the TokenRequest API (what a kubelet mounts into a pod). */
export async function requestServiceAccountToken(kc: KubeConfig, namespace: string, serviceAccount: string, opts: TokenOptions = {}): Promise<string> {
  const body: AuthenticationV1TokenRequest = {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: {
      audiences: [],
      expirationSeconds: opts.expirationSeconds ?? 3600,
      ...(opts.boundPod ? { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: opts.boundPod.name, uid: opts.boundPod.uid } } : {}),
    },
  };
  const res = await kc.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({ name: serviceAccount, namespace, body });
  const token = res.status?.token;
  if (!token) throw new Error(`TokenRequest for ${namespace}/${serviceAccount} returned no token`);
  return token;
}
