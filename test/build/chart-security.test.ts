import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { HELD_REQUESTS_METRIC, ONGOING_REQUESTS_METRIC } from '../../operator/resources/hpa.js';
import { MANAGED_BY } from '../../operator/resources/meta.js';
import { LABEL_COMPONENT, LABEL_MANAGED_BY } from '../../common/names.js';
import { helmPath } from '../../harness/kube-tools.js';

const run = promisify(execFile);
/** The first call may build helm (install-kube-tools.sh); later ones take a second. */
const HELM_TIMEOUT_MS = 600_000;

interface Container {
  name: string;
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: unknown }[];
  ports?: { name: string; containerPort: number }[];
  securityContext?: { allowPrivilegeEscalation?: boolean; readOnlyRootFilesystem?: boolean; capabilities?: { drop?: string[] } };
}
interface Doc {
  kind?: string;
  metadata?: { name?: string };
  spec?: {
    ports?: { name: string; port: number; targetPort: string }[];
    endpoints?: { port: string }[];
    template?: {
      metadata?: { annotations?: Record<string, string> };
      spec?: { securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; seccompProfile?: { type?: string } }; containers?: Container[]; serviceAccountName?: string };
    };
    selector?: { matchLabels?: Record<string, string> };
  };
  data?: Record<string, string>;
}

async function render(...set: string[]): Promise<Doc[]> {
  const { stdout } = await run(await helmPath(), ['template', 'modelmux', 'helm/modelmux', '--namespace', 'modelmux-system', ...set.flatMap((s) => ['--set', s])], {
    maxBuffer: 16 * 1024 * 1024,
  });
  return parseAllDocuments(stdout)
    .map((d) => d.toJS() as Doc)
    .filter((d) => d !== null);
}

describe('the chart workloads', () => {
  it(
    'run the operator and the router under the restricted Pod Security Standard',
    async () => {
      const deployments = (await render()).filter((d) => d.kind === 'Deployment');
      expect(deployments.map((d) => d.metadata?.name).sort()).toEqual(['modelmux-operator', 'modelmux-router']);
      for (const d of deployments) {
        const pod = d.spec?.template?.spec;
        expect(pod?.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
        expect(pod?.securityContext?.runAsUser).toBeGreaterThan(0);
        for (const c of pod?.containers ?? []) {
          expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
        }
        expect(pod?.serviceAccountName).toBe(d.metadata?.name);
      }
    },
    HELM_TIMEOUT_MS,
  );

  it(
    'runs the router with kube discovery and the operator with its own lease',
    async () => {
      const docs = await render();
      const args = (name: string): string[] => docs.find((d) => d.kind === 'Deployment' && d.metadata?.name === name)?.spec?.template?.spec?.containers?.[0]?.args ?? [];
      expect(args('modelmux-router').slice(0, 3)).toEqual(['router', '--discovery', 'kube']);
      expect(args('modelmux-operator')[0]).toBe('operator');
    },
    HELM_TIMEOUT_MS,
  );

  it(
    'scrapes the replica pods by the labels the operator gives them',
    async () => {
      const monitor = (await render('metrics.podMonitor.enabled=true')).find((d) => d.kind === 'PodMonitor');
      expect(monitor?.spec?.selector?.matchLabels).toEqual({ [LABEL_COMPONENT]: 'replica', [LABEL_MANAGED_BY]: MANAGED_BY });
    },
    HELM_TIMEOUT_MS,
  );

  it(
    "serves the HPA's metric through the prometheus-adapter rule",
    async () => {
      const cm = (await render('prometheusAdapter.configMap.enabled=true')).find((d) => d.kind === 'ConfigMap');
      const config = cm?.data?.['config.yaml'] ?? '';
      expect(config).toContain(`seriesQuery: '${ONGOING_REQUESTS_METRIC}{namespace!="",pod!=""}'`);
      expect(config).toContain(`as: ${ONGOING_REQUESTS_METRIC}`);
      // And the External metric an HPA with minReplicas 0 reads, selected by the route's label.
      expect(config).toContain(`seriesQuery: '${HELD_REQUESTS_METRIC}{route!=""}'`);
      expect(config).toContain(`as: ${HELD_REQUESTS_METRIC}`);
    },
    HELM_TIMEOUT_MS,
  );

  it(
    "keeps the router's admin port off the client Service, scrapes it, and reads the repository token from a Secret only",
    async () => {
      const docs = await render('metrics.serviceMonitor.enabled=true', 'router.repositoryApiToken.secretName=repo-token');
      const router = docs.find((d) => d.kind === 'Deployment' && d.metadata?.name === 'modelmux-router');
      const container = router?.spec?.template?.spec?.containers?.[0];
      expect(container?.ports).toContainEqual(expect.objectContaining({ name: 'admin', containerPort: 8002 }));
      expect(container?.args?.join(' ')).toContain('--admin-port 8002');
      expect(router?.spec?.template?.metadata?.annotations?.['prometheus.io/port']).toBe('8002');
      expect(container?.env).toContainEqual({ name: 'MODELMUX_REPOSITORY_API_TOKEN', valueFrom: { secretKeyRef: { name: 'repo-token', key: 'token' } } });
      expect(JSON.stringify(container?.args)).not.toContain('repository-api-token');
      const services = docs.filter((d) => d.kind === 'Service');
      expect(services.find((d) => d.metadata?.name === 'modelmux-router')?.spec?.ports?.map((p) => p.targetPort)).toEqual(['http', 'grpc']);
      expect(services.find((d) => d.metadata?.name === 'modelmux-router-admin')?.spec?.ports).toEqual([expect.objectContaining({ name: 'admin', targetPort: 'admin' })]);
      expect(docs.find((d) => d.kind === 'ServiceMonitor')?.spec?.endpoints?.map((e) => e.port)).toEqual(['admin', 'metrics']);
      // Without a scraper, no Service reaches it; without a Secret, no token.
      const plain = await render();
      expect(plain.filter((d) => d.kind === 'Service').map((d) => d.metadata?.name)).not.toContain('modelmux-router-admin');
      expect(JSON.stringify(plain)).not.toContain('MODELMUX_REPOSITORY_API_TOKEN');
    },
    HELM_TIMEOUT_MS,
  );
});
