import { copyFile, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { aggregatedServerArgs, issueAggregatedServingCertificate, registerAggregatedServer, unregisterAggregatedServer } from './api-service.js';
import { createCertificateAuthority, issueCertificate } from './certs.js';
import { freePort, type ControlPlane } from './control-plane.js';
import { eventually } from './eventually.js';
import { kedaAssets } from './kube-tools.js';
import { removeDirOnDeath, spawnManaged, type ManagedProcess } from './process-reaper.js';

/** Where KEDA's manifests put it; its metrics API server's Service and APIService live here. */
export const KEDA_NAMESPACE = 'keda';
const METRICS_SERVICE = 'keda-metrics-apiserver';
const METRICS_GROUPS = ['external.metrics.k8s.io'];

export interface Keda {
  /** What the operator and the metrics API server wrote, for failure messages. */
  logs(): Promise<string>;
  /** Stops both processes and removes the APIService (the control plane stays usable). */
  stop(): Promise<void>;
}

/**
 * Runs KEDA (built from the Go module proxy, build-keda.sh) against the test control plane as its
 * manifests run it in a cluster, minus the pods: its CRDs applied, `keda` (the operator: it turns
 * ScaledObjects into HPAs and queries the scalers) and `keda-adapter` (the metrics API server)
 * as processes, the two talking gRPC over mutual TLS as with KEDA's own certificates, and the
 * adapter registered as the `external.metrics.k8s.io` APIService through the API server's
 * aggregation layer (api-service.ts). The HPA controller then reads KEDA's metrics the way it
 * does in a cluster: kube-apiserver → front proxy → adapter → operator → Prometheus. Resolves
 * once the APIService is Available. Both processes use a client certificate in system:masters:
 * KEDA's RBAC is KEDA's to test, not ours.
 */
export async function startKeda(cp: ControlPlane, opts: { keepDataDir?: boolean } = {}): Promise<Keda> {
  const keep = opts.keepDataDir ?? process.env['MODELMUX_KEEP_CLUSTER'] === '1';
  const assets = await kedaAssets();
  const dir = await mkdtemp(join(tmpdir(), 'modelmux-keda-'));
  const forgetDir = keep ? () => undefined : removeDirOnDeath(dir);
  let operator: ManagedProcess | undefined;
  let adapter: ManagedProcess | undefined;
  const exited = new Set<string>();
  const spawnWatched = (binary: string, args: readonly string[], env: NodeJS.ProcessEnv): ManagedProcess => {
    const p = spawnManaged(join(assets, binary), args, { env, logFile: join(dir, `${binary}.log`) });
    void p.exited.then(() => exited.add(binary));
    return p;
  };
  const logs = async (): Promise<string> => {
    const read = (f: string): Promise<string> => readFile(join(dir, f), 'utf8').catch(() => '');
    return `--- keda (operator)\n${await read('keda.log')}\n--- keda-adapter (metrics API server)\n${await read('keda-adapter.log')}`;
  };
  const stop = async (): Promise<void> => {
    await unregisterAggregatedServer(cp, METRICS_GROUPS);
    await Promise.all([adapter?.stop(5000), operator?.stop(5000)]);
    if (!keep) await rm(dir, { recursive: true, force: true });
    forgetDir();
  };
  try {
    // Server-side: the ScaledJob CRD (650 KB) is too big for client-side apply's annotation.
    await cp.kubectl(['apply', '--server-side', '-f', join(assets, 'crd')]);
    // kubectl wait fails outright on a CRD that has no status yet.
    await eventually(() => cp.kubectl(['wait', '--for=condition=Established', 'crd/scaledobjects.keda.sh', 'crd/triggerauthentications.keda.sh', '--timeout=60s']), 60_000, 500);
    await cp.kubectl(['create', 'namespace', KEDA_NAMESPACE]);

    // KEDA's own certificate layout (its cert rotation writes the same files): a folder per
    // process holding ca.crt, tls.crt and tls.key; the operator serves gRPC with its pair and
    // requires the adapter's client pair, signed by the same CA.
    const pki = join(dir, 'pki');
    const operatorCerts = join(dir, 'operator-certs');
    const adapterCerts = join(dir, 'adapter-certs');
    await Promise.all([mkdir(pki), mkdir(operatorCerts), mkdir(adapterCerts)]);
    const ca = await createCertificateAuthority(pki, 'modelmux-test-keda-ca');
    const [, , serving] = await Promise.all([
      issueCertificate(operatorCerts, ca, { name: 'tls', commonName: 'keda-operator', usage: 'server', altNames: ['IP:127.0.0.1', `DNS:keda-operator.${KEDA_NAMESPACE}.svc.cluster.local`] }),
      issueCertificate(adapterCerts, ca, { name: 'tls', commonName: 'keda-metrics-apiserver', usage: 'client' }),
      issueAggregatedServingCertificate(pki, ca, METRICS_SERVICE, KEDA_NAMESPACE),
      copyFile(ca.certFile, join(operatorCerts, 'ca.crt')),
      copyFile(ca.certFile, join(adapterCerts, 'ca.crt')),
    ]);
    const kubeconfig = await cp.userKubeconfig('keda-operator', ['system:masters']);
    const [grpcPort, probePort, securePort, adapterMetricsPort] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    const env = {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      HOME: dir,
      KUBECONFIG: kubeconfig,
      WATCH_NAMESPACE: '',
      POD_NAMESPACE: KEDA_NAMESPACE,
      KEDA_CLUSTER_OBJECT_NAMESPACE: KEDA_NAMESPACE,
    };
    operator = spawnWatched(
      'keda',
      [
        '--leader-elect=false',
        // "0": no metrics listener (its default :8080 would take the replicas' port on every address).
        '--metrics-bind-address=0',
        `--health-probe-bind-address=127.0.0.1:${probePort}`,
        `--metrics-service-bind-address=127.0.0.1:${grpcPort}`,
        `--cert-dir=${operatorCerts}`,
        `--ca-dir=${join(dir, 'no-custom-ca')}`,
        '--zap-log-level=info',
      ],
      env,
    );
    await eventually(
      async () => {
        if (exited.size > 0) throw new Error(`${[...exited].join(', ')} exited`);
        const res = await fetch(`http://127.0.0.1:${probePort}/readyz`);
        if (res.status !== 200) throw new Error(`keda operator /readyz ${res.status}`);
      },
      60_000,
      250,
    );

    adapter = spawnWatched(
      'keda-adapter',
      [...aggregatedServerArgs(securePort, serving, adapterCerts, kubeconfig), `--metrics-service-address=127.0.0.1:${grpcPort}`, `--port=${adapterMetricsPort}`, '--zap-log-level=info'],
      env,
    );

    await registerAggregatedServer(cp, { service: METRICS_SERVICE, namespace: KEDA_NAMESPACE, port: securePort, ca, groups: METRICS_GROUPS }, () =>
      exited.size > 0 ? `${[...exited].join(', ')} exited` : undefined,
    );
  } catch (err) {
    const text = await logs();
    await stop();
    throw new Error(`${err instanceof Error ? err.message : String(err)}\n${text.slice(-4000)}`, { cause: err });
  }
  return { logs, stop };
}
