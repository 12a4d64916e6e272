import { ConfigError } from '../common/config.js';
import { readRoutesFile } from '../router/routes/route-file.js';

/**
 * `modelmux local --routes`: the file must parse, and its routes must name the one local pool,
 * or a typo would leave every route silently unserved. Problems are a ConfigError (exit code 2).
 */
export function checkLocalRoutes(path: string, pool: string): void {
  const byPool = readRoutesFile(path, 'local', '--routes');
  const strays = [...byPool]
    .filter(([p]) => p !== pool)
    .flatMap(([p, routes]) => routes.map((r) => `--routes ${path}: ModelRoute ${r.metadata.name} names pool ${p}; the local pool is ${pool} (--route-prefix /${pool})`));
  if (strays.length > 0) throw new ConfigError('local', strays);
}
