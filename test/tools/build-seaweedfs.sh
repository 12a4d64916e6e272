#!/usr/bin/env bash
# Builds SeaweedFS (`weed`, whose `server -s3` mode is the S3-compatible store of the tests)
# from the Go module proxy into a cache outside the clone. Prints the binary's path last.
set -euo pipefail
VERSION="${MODELMUX_SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}"
CACHE_ROOT="${MODELMUX_CACHE:-$HOME/.cache/modelmux}"
OUT="$CACHE_ROOT/seaweedfs-$VERSION"
if [ -x "$OUT/weed" ]; then echo "$OUT/weed"; exit 0; fi
mkdir -p "$OUT"
echo "building SeaweedFS $VERSION into $OUT (first run only)" >&2
CGO_ENABLED=0 GOBIN="$OUT" go install -trimpath -ldflags='-s -w' "github.com/seaweedfs/seaweedfs/weed@$VERSION" >&2
echo "$OUT/weed"
