#!/usr/bin/env bash
# Builds vegeta (github.com/tsenart/vegeta), the Go load generator bench:grpc's open-loop windows
# send with, from the Go module proxy into the cache outside the clone, once per version. Not part
# of CI's test run. Prints the binary's path on its last line.
set -euo pipefail
VERSION=v12.13.0
CACHE_ROOT="${MODELMUX_CACHE:-$HOME/.cache/modelmux}"
BIN="$CACHE_ROOT/vegeta-$VERSION/vegeta"
if [ ! -x "$BIN" ]; then
  GOBIN="$(dirname "$BIN")" CGO_ENABLED=0 go install -trimpath -ldflags='-s -w' "github.com/tsenart/vegeta/v12@$VERSION" >&2
fi
"$BIN" -version >&2
echo "$BIN"
