#!/usr/bin/env bash
# Builds SeaweedFS (`weed`, whose S3 gateway is the S3-compatible store of the tests) from the
# Go module proxy into a cache outside the clone. Prints the binary's path on its last line.
set -euo pipefail
VERSION="${MODELMUX_SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}"
CACHE_ROOT="${MODELMUX_CACHE:-$HOME/.cache/modelmux}"
OUT="$CACHE_ROOT/seaweedfs-$VERSION"
if [ -x "$OUT/weed" ]; then echo "$OUT/weed"; exit 0; fi
WORK="$CACHE_ROOT/seaweedfs-src-$VERSION"
mkdir -p "$OUT" "$WORK"
cd "$WORK"
echo "building SeaweedFS $VERSION into $OUT (first run only)" >&2

# `go install pkg@version` refuses a module whose go.mod has replace directives, so build it
# from a wrapper module that carries those replaces.
info=$(go mod download -json "github.com/seaweedfs/seaweedfs@$VERSION")
modfile=$(printf '%s' "$info" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
srcdir=$(printf '%s' "$info" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
{
  echo "module modelmux.io/seaweedfs"
  echo
  grep -E '^go ' "$modfile"
  echo
  echo "require github.com/seaweedfs/seaweedfs $VERSION"
  echo
  grep -E '^replace ' "$modfile" || true
} > go.mod
cat > tools.go <<'GO'
//go:build tools

package tools

import _ "github.com/seaweedfs/seaweedfs/weed"
GO
cp "$modfile" seaweedfs.go.mod
# SeaweedFS's own go.sum: some of its forks (github.com/seaweedfs/cockroachdb-parser) are not in
# the public checksum database, so their hashes must come from the go.sum it was released with.
cp "$srcdir/go.sum" go.sum
chmod u+w go.sum
# Take the versions SeaweedFS itself was tested with, rather than whatever MVS would pick.
go mod edit $(awk '/^require \(/{r=1;next} /^\)/{r=0} r&&NF>=2{print "-require=" $1 "@" $2}' seaweedfs.go.mod | grep -v '^-require=//')
# -e: test-only dependencies of dependencies need not resolve for the build.
go mod tidy -e >&2
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$OUT/weed" github.com/seaweedfs/seaweedfs/weed >&2
echo "$OUT/weed"
