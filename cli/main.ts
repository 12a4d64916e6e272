#!/usr/bin/env node
import { ConfigError, HelpRequested } from '../common/config.js';
import { unsupportedNode } from '../common/node-version.js';

/**
 * The `modelmux` command. Each subcommand's module exports `run(argv, env)`, which resolves
 * once the program is up and stops it on SIGTERM/SIGINT itself.
 */
const SUBCOMMANDS: Record<string, { summary: string; load: () => Promise<{ run(argv: string[], env: NodeJS.ProcessEnv): Promise<void> }> }> = {
  local: { summary: 'Run a router and N replicas on this machine (no Kubernetes).', load: () => import('./local.js') },
  replica: { summary: 'Serve many ONNX models from a bounded model cache (one per pod).', load: () => import('../replica/main.js') },
  router: { summary: 'Route each request to a replica that holds its model.', load: () => import('../router/main.js') },
  operator: { summary: 'Reconcile MultiplexedDeployment resources.', load: () => import('../operator/main.js') },
  models: { summary: 'Write the deterministic example models to a folder or bucket.', load: () => import('./models.js') },
};

function usage(): string {
  const rows = Object.entries(SUBCOMMANDS).map(([name, s]) => `  ${name.padEnd(10)}${s.summary}`);
  return `usage: modelmux <command> [flags]\n\ncommands:\n${rows.join('\n')}\n\nRun 'modelmux <command> --help' for its flags.\n`;
}

async function main(): Promise<void> {
  const unsupported = unsupportedNode(process.versions.node);
  if (unsupported !== undefined) {
    process.stderr.write(`${unsupported}\n`);
    process.exitCode = 2;
    return;
  }
  const [name, ...rest] = process.argv.slice(2);
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(usage());
    process.exitCode = name === undefined ? 2 : 0;
    return;
  }
  const sub = SUBCOMMANDS[name];
  if (!sub) {
    process.stderr.write(`modelmux: unknown command "${name}"\n\n${usage()}`);
    process.exitCode = 2;
    return;
  }
  try {
    await (await sub.load()).run(rest, process.env);
  } catch (err) {
    if (err instanceof HelpRequested) {
      process.stdout.write(err.text);
      return;
    }
    if (err instanceof ConfigError) {
      process.stderr.write(err.message + '\n');
      process.exit(2);
    }
    process.stderr.write(`modelmux ${name}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  }
}

await main();
