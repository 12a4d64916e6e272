import { readFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import { API_GROUP, API_VERSION, KIND } from '../../common/names.js';
import { multiplexedDeploymentSpecSchema } from '../../common/resource.js';

describe('examples/', () => {
  it('holds a MultiplexedDeployment whose spec the resource schema accepts', async () => {
    const docs = parseAllDocuments(await readFile('examples/wine-multiplexeddeployment.yaml', 'utf8')).map((d) => d.toJS() as { apiVersion?: string; kind?: string; spec?: unknown });
    const mxd = docs.find((d) => d.kind === KIND);
    expect(mxd?.apiVersion).toBe(`${API_GROUP}/${API_VERSION}`);
    const parsed = multiplexedDeploymentSpecSchema.safeParse(mxd?.spec);
    expect(parsed.success ? [] : parsed.error.issues).toEqual([]);
    expect(parsed.data?.autoscaling?.maxReplicas).toBeGreaterThanOrEqual(parsed.data?.autoscaling?.minReplicas ?? Infinity);
  });
});
