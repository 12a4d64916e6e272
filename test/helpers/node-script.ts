import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Runs an ES module snippet in a real Node process from the project root and parses its JSON
 * stdout. onnxruntime-node cannot run inside jest's VM context (its typed arrays come from
 * another realm), so anything touching it runs out here, as it does in production.
 */
export async function runNodeScript<T>(source: string, nodeFlags: readonly string[] = []): Promise<T> {
  const { stdout } = await run(process.execPath, [...nodeFlags, '--input-type=module', '-e', source], { cwd: process.cwd(), maxBuffer: 64 * 1024 * 1024 });
  return JSON.parse(stdout) as T;
}
