/** What a subcommand's module offers: `run` resolves once the program is up and stops it on SIGTERM/SIGINT itself. */
export interface SubcommandModule {
  run(argv: string[], env: NodeJS.ProcessEnv): Promise<void>;
}

/** A subcommand's configuration parser: throws HelpRequested on `--help`, ConfigError on bad flags. */
export type ConfigParser = (argv: readonly string[], env: NodeJS.ProcessEnv) => unknown;

export interface Subcommand {
  summary: string;
  load: () => Promise<SubcommandModule>;
  /**
   * The parser `run` starts with, loaded without the program around it: docs/cli.md is written
   * from its `--help` (`npm run docs`) without starting onnxruntime or a Kubernetes client.
   */
  config: () => Promise<ConfigParser>;
}

/**
 * The `modelmux` subcommands. Modules load on demand, so `modelmux router` never loads the
 * replica's onnxruntime.
 */
export const SUBCOMMANDS: Readonly<Record<string, Subcommand>> = {
  local: {
    summary: 'Run a router and N replicas on this machine (no Kubernetes).',
    load: () => import('./local.js'),
    config: async () => (await import('./local.js')).parseLocalConfig,
  },
  replica: {
    summary: 'Serve many ONNX models from a bounded model cache (one per pod).',
    load: () => import('../replica/main.js'),
    config: async () => (await import('../replica/config.js')).parseReplicaConfig,
  },
  router: {
    summary: 'Route each request to a replica that holds its model.',
    load: () => import('../router/main.js'),
    config: async () => (await import('../router/config.js')).parseRouterConfig,
  },
  operator: {
    summary: 'Reconcile MultiplexedDeployment resources.',
    load: () => import('../operator/main.js'),
    config: async () => (await import('../operator/config.js')).parseOperatorConfig,
  },
  models: {
    summary: 'Write the deterministic example models to a folder or bucket.',
    load: () => import('./models.js'),
    config: async () => (await import('./models.js')).parseModelsConfig,
  },
  doctor: {
    summary: 'Say what can run here: onnxruntime, each execution provider (cpu, cuda) and the GPUs.',
    load: () => import('./doctor.js'),
    config: async () => (await import('./doctor.js')).parseDoctorConfig,
  },
};

/** What `modelmux`, `modelmux --help` and an unknown command print. */
export function usage(): string {
  const rows = Object.entries(SUBCOMMANDS).map(([name, s]) => `  ${name.padEnd(10)}${s.summary}`);
  return `usage: modelmux <command> [flags]\n\ncommands:\n${rows.join('\n')}\n\nRun 'modelmux <command> --help' for its flags.\n`;
}
