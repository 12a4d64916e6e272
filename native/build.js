// Compiles native/file-map.cc into dist/native/file-map.node with the C++ compiler on the machine
// and the Node-API headers of two npm packages (node-api-headers, node-addon-api): node-gyp would
// download Node's headers, which a build here must not. Node-API is ABI-stable, so the module
// does not depend on which Node builds it: one build loads on Node 24 and 26.
// Without a compiler or the headers the build goes on and says so: replicas then read model files
// instead of mapping them (slower loads, same answers). MODELMUX_REQUIRE_NATIVE=1 makes that an
// error, for CI and the container image.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist/native/file-map.node');
const cxx = process.env.CXX ?? 'c++';
// The oldest Node-API version that has everything file-map.cc uses (napi_detach_arraybuffer: 7).
const NAPI_VERSION = 8;

function skip(reason) {
  const msg = `modelmux: native/file-map.cc not built (${reason}); replicas will read model files instead of mapping them`;
  if (process.env.MODELMUX_REQUIRE_NATIVE === '1') {
    console.error(`${msg}. MODELMUX_REQUIRE_NATIVE=1: failing.`);
    process.exit(1);
  }
  console.error(`WARNING: ${msg}.`);
  process.exit(0);
}

/** The folder of an npm package's headers, or undefined when the package is not installed. */
function packageDir(name) {
  try {
    return dirname(createRequire(join(root, 'package.json')).resolve(`${name}/package.json`));
  } catch {
    return undefined;
  }
}

if (process.platform !== 'linux') skip(`mapping is built for Linux only, this is ${process.platform}`);
const nodeApi = packageDir('node-api-headers');
const addonApi = packageDir('node-addon-api');
if (nodeApi === undefined || addonApi === undefined) {
  skip('the devDependencies node-api-headers and node-addon-api are not installed; run npm ci without --omit=dev');
}
mkdirSync(dirname(out), { recursive: true });
// A failed build must not leave the module of an earlier one behind.
rmSync(out, { force: true });
try {
  // -isystem: warnings inside the headers are not ours to fail on.
  execFileSync(
    cxx,
    [
      '-O2',
      '-std=c++17',
      '-shared',
      '-fPIC',
      '-Wall',
      '-Wextra',
      '-Werror',
      `-DNAPI_VERSION=${NAPI_VERSION}`,
      '-isystem',
      join(nodeApi, 'include'),
      '-isystem',
      addonApi,
      '-o',
      out,
      join(root, 'native/file-map.cc'),
    ],
    { stdio: 'inherit' },
  );
} catch (err) {
  skip(`${cxx} failed: ${err instanceof Error ? err.message : String(err)}`);
}
