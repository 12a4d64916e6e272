// Compiles native/file-map.c into dist/native/file-map.node with the C compiler and the Node
// headers already on the machine: node-gyp would download headers, which a build here must not.
// Without a compiler or headers the build goes on and says so: replicas then read model files
// instead of mapping them (slower loads, same answers). MODELMUX_REQUIRE_NATIVE=1 makes that an
// error, for CI and the container image.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist/native/file-map.node');
const headers = [process.env.MODELMUX_NODE_HEADERS, join(dirname(process.execPath), '../include/node')].find(
  (d) => d !== undefined && existsSync(join(d, 'node_api.h')),
);
const cc = process.env.CC ?? 'cc';

function skip(reason) {
  const msg = `modelmux: native/file-map.c not built (${reason}); replicas will read model files instead of mapping them`;
  if (process.env.MODELMUX_REQUIRE_NATIVE === '1') {
    console.error(`${msg}. MODELMUX_REQUIRE_NATIVE=1: failing.`);
    process.exit(1);
  }
  console.error(`WARNING: ${msg}.`);
  process.exit(0);
}

if (process.platform !== 'linux') skip(`mapping is built for Linux only, this is ${process.platform}`);
if (headers === undefined) skip(`no node_api.h in ${join(dirname(process.execPath), '../include/node')}; set MODELMUX_NODE_HEADERS to the folder that has it`);
mkdirSync(dirname(out), { recursive: true });
try {
  execFileSync(cc, ['-O2', '-std=c11', '-D_GNU_SOURCE', '-shared', '-fPIC', '-Wall', '-Wextra', '-Werror', `-I${headers}`, '-o', out, join(root, 'native/file-map.c')], { stdio: 'inherit' });
} catch (err) {
  skip(`${cc} failed: ${err instanceof Error ? err.message : String(err)}`);
}
