import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { CRDS } from '../../common/crd.js';
import { crdYamlFrom } from '../../common/crd-generator.js';
import { OPERATOR_CLUSTER_RULES, OPERATOR_LEADER_ELECTION_RULES } from '../../operator/rbac-rules.js';
import { helmPath } from '../../harness/kube-tools.js';

const run = promisify(execFile);
/** The first call may build helm (install-kube-tools.sh); later ones take a second. */
const HELM_TIMEOUT_MS = 600_000;
const CHART = 'helm/modelmux';

type Doc = { kind?: string; metadata?: { name?: string }; rules?: unknown };

async function render(...set: string[]): Promise<Doc[]> {
  const helm = await helmPath();
  const args = ['template', 'modelmux', CHART, '--namespace', 'modelmux-system', ...set.flatMap((s) => ['--set', s])];
  const { stdout } = await run(helm, args, { maxBuffer: 16 * 1024 * 1024 });
  return parseAllDocuments(stdout)
    .map((d) => d.toJS() as Doc)
    .filter((d) => d !== null);
}

/** Rules as sets, so the YAML's order of verbs and resources does not matter. */
function normalise(rules: unknown): string[] {
  return (rules as { apiGroups?: string[]; resources?: string[]; verbs?: string[] }[])
    .map((r) => JSON.stringify([[...(r.apiGroups ?? [])].sort(), [...(r.resources ?? [])].sort(), [...(r.verbs ?? [])].sort()]))
    .sort();
}

describe('the helm chart and the plain manifests', () => {
  it.each(CRDS.map((def) => [def.kind, def] as const))(
    "holds an exact copy of the generated %s CRD in the chart's crds/ folder",
    async (_kind, def) => {
      const copy = await readFile(join(CHART, def.file), 'utf8');
      expect(copy).toBe(await readFile(def.file, 'utf8'));
      expect(copy).toBe(crdYamlFrom(def));
    },
    HELM_TIMEOUT_MS,
  );

  it(
    'grants the operator exactly the rules operator/rbac-rules.ts declares',
    async () => {
      const docs = await render();
      const clusterRole = docs.find((d) => d.kind === 'ClusterRole' && d.metadata?.name === 'modelmux-operator');
      const role = docs.find((d) => d.kind === 'Role' && d.metadata?.name === 'modelmux-operator-leader-election');
      expect(normalise(clusterRole?.rules)).toEqual(normalise(OPERATOR_CLUSTER_RULES));
      expect(normalise(role?.rules)).toEqual(normalise(OPERATOR_LEADER_ELECTION_RULES));
    },
    HELM_TIMEOUT_MS,
  );

  it(
    'lets the router only read pods, MultiplexedDeployments and ModelRoutes',
    async () => {
      const docs = await render();
      const clusterRole = docs.find((d) => d.kind === 'ClusterRole' && d.metadata?.name === 'modelmux-router');
      expect(normalise(clusterRole?.rules)).toEqual(
        normalise([
          { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
          { apiGroups: ['modelmux.io'], resources: ['multiplexeddeployments'], verbs: ['get', 'list', 'watch'] },
          { apiGroups: ['modelmux.io'], resources: ['modelroutes'], verbs: ['list', 'watch'] },
        ]),
      );
    },
    HELM_TIMEOUT_MS,
  );

  it(
    'commits deploy/modelmux.yaml exactly as `npm run deploy` renders it',
    async () => {
      const out = await mkdtemp(join(tmpdir(), 'modelmux-deploy-'));
      try {
        await run('bash', ['helm/render-deploy.sh', out], { env: { ...process.env, HELM: await helmPath() } });
        expect(await readFile('deploy/modelmux.yaml', 'utf8')).toBe(await readFile(join(out, 'modelmux.yaml'), 'utf8'));
      } finally {
        await rm(out, { recursive: true, force: true });
      }
    },
    HELM_TIMEOUT_MS,
  );

  it(
    'passes helm lint --strict, with the optional monitoring objects on too',
    async () => {
      const helm = await helmPath();
      await run(helm, ['lint', CHART, '--strict']);
      await run(helm, ['lint', CHART, '--strict', '--set', 'metrics.serviceMonitor.enabled=true,metrics.podMonitor.enabled=true,prometheusAdapter.configMap.enabled=true']);
    },
    HELM_TIMEOUT_MS,
  );

  it(
    'refuses a misspelt value through values.schema.json',
    async () => {
      const helm = await helmPath();
      const err = await run(helm, ['template', 'x', CHART, '--set', 'router.replicaz=3']).catch((e: unknown) => e);
      expect((err as { stderr?: string }).stderr).toContain("additional properties 'replicaz' not allowed");
    },
    HELM_TIMEOUT_MS,
  );
});
