import type { V1Service } from '@kubernetes/client-node';
import { GRPC_PORT_NAME } from '../../common/names.js';
import { REPLICA_GRPC_PORT, REPLICA_PORT } from '../../common/replica-env.js';
import { ownedMeta, ownedNames, selectorLabels, type StoredMultiplexedDeployment } from './meta.js';

/**
 * A headless Service: it gives the replicas stable DNS names and an Endpoints object, while
 * the router picks pods itself (a ClusterIP would balance blindly, ignoring loaded models).
 */
export function buildService(mxd: StoredMultiplexedDeployment): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: ownedMeta(mxd, ownedNames(mxd).service),
    spec: {
      clusterIP: 'None',
      selector: selectorLabels(mxd),
      ports: [
        { name: 'http', port: REPLICA_PORT, targetPort: 'http', protocol: 'TCP' },
        { name: GRPC_PORT_NAME, port: REPLICA_GRPC_PORT, targetPort: GRPC_PORT_NAME, protocol: 'TCP' },
      ],
    },
  };
}
