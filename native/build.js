// Compiles native/file-map.cc into dist/native/file-map.node with the C++ compiler and the Node
// headers already on the machine: node-gyp would download headers, which a build here must not.
// Without a compiler or headers the build goes on and says so: replicas then read model files
// instead of mapping them (slower loads, same answers). MODELMUX_REQUIRE_NATIVE=1 makes that an
// error, for CI and the container image.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist/native/file-map.node');
const headers = [process.env.MODELMUX_NODE_HEADERS, join(dirname(process.execPath), '../include/node')].find(
  (d) => d !== undefined && existsSync(join(d, 'node.h')) && existsSync(join(d, 'v8.h')),
);
const cxx = process.env.CXX ?? 'c++';

function skip(reason) {
  const msg = `modelmux: native/file-map.cc not built (${reason}); replicas will read model files instead of mapping them`;
  if (process.env.MODELMUX_REQUIRE_NATIVE === '1') {
    console.error(`${msg}. MODELMUX_REQUIRE_NATIVE=1: failing.`);
    process.exit(1);
  }
  console.error(`WARNING: ${msg}.`);
  process.exit(0);
}

if (process.platform !== 'linux') skip(`mapping is built for Linux only, this is ${process.platform}`);
if (headers === undefined) skip(`no node.h and v8.h in ${join(dirname(process.execPath), '../include/node')}; set MODELMUX_NODE_HEADERS to the folder that has it`);
mkdirSync(dirname(out), { recursive: true });
// A failed build must not leave the module of an earlier one behind.
rmSync(out, { force: true });
try {
  // -isystem: warnings inside Node's and V8's headers are not ours to fail on.
  execFileSync(cxx, ['-O2', '-std=c++17', '-shared', '-fPIC', '-Wall', '-Wextra', '-Werror', '-isystem', headers, '-o', out, join(root, 'native/file-map.cc')], { stdio: 'inherit' });
} catch (err) {
  skip(`${cxx} failed: ${err instanceof Error ? err.message : String(err)}`);
}
