/**
 * The Node.js versions modelmux runs on: 24 from 24.11 and 26 or later, the LTS lines (package.json
 * `engines`, ADR 0028). Older ones fail deep inside a dependency (undici needs newer Node APIs),
 * with stack traces a user cannot act on; this says what to install instead. Pure.
 */
export function unsupportedNode(version: string): string | undefined {
  const [major = 0, minor = 0] = version.replace(/^v/, '').split('.').map(Number);
  if ((major === 24 && minor >= 11) || major >= 26) return undefined;
  return (
    `modelmux needs Node.js 24.11 or later in the 24 line, or 26 (LTS); this is ${version}. ` +
    'Install one (nvm install 26, or from the npm registry: bash test/tools/install-node.sh 26 in a checkout, then put the folder it prints first on PATH) and run modelmux again.'
  );
}
