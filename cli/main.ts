#!/usr/bin/env node
import { ConfigError, HelpRequested } from '../common/config.js';
import { unsupportedNode } from '../common/node-version.js';
import { relaunchEnv } from '../common/cuda/cuda-libraries.js';
import { SUBCOMMANDS, usage } from './commands.js';
import { relaunch } from './relaunch.js';
import { writeTerminationMessage } from './termination-log.js';

/** The `modelmux` command: one subcommand per program (cli/commands.ts). */
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
      writeTerminationMessage(err.message);
      process.exit(2);
    }
    process.stderr.write(`modelmux ${name}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    writeTerminationMessage(`modelmux ${name}: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  }
}

// A configured CUDA folder must be on the library path before onnxruntime loads, and glibc reads
// it only at process start (docs/adr/0045-cuda-provider-from-wheels.md).
const cudaEnv = relaunchEnv(process.env);
if (cudaEnv !== undefined) relaunch(cudaEnv);
else await main();
