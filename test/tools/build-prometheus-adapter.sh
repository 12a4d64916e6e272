#!/usr/bin/env bash
# Builds prometheus-adapter (`adapter`, the custom and external metrics API server the HPA reads
# Prometheus through) from the Go module proxy into a cache outside the clone, keyed by version.
# Prints the directory on its last line. The HPA cluster test (test/cluster/hpa-adapter.test.ts)
# runs it against the test control plane with the chart's rule. The proxy serves the exact
# version, not `@latest` (a `go list -m …@latest` gets 403): the version is pinned here.
set -euo pipefail

ADAPTER_VERSION="${MODELMUX_PROMETHEUS_ADAPTER_VERSION:-v0.12.0}"
CACHE_ROOT="${MODELMUX_CACHE:-$HOME/.cache/modelmux}"
OUT="$CACHE_ROOT/prometheus-adapter-$ADAPTER_VERSION"

if [ -x "$OUT/adapter" ]; then
  echo "$OUT"
  exit 0
fi

echo "building prometheus-adapter $ADAPTER_VERSION into $OUT (first run only; a few minutes on 2 cores)" >&2
export GOTOOLCHAIN=auto
source "$(dirname "$0")/go-module-source.sh"
WORK="$CACHE_ROOT/prometheus-adapter-src-$ADAPTER_VERSION"
mkdir -p "$OUT"
# As released: its go.mod builds with the Go here as is.
SRC=$(unpack_go_module sigs.k8s.io/prometheus-adapter "$ADAPTER_VERSION" "$WORK")
cd "$SRC"

export CGO_ENABLED=0
go build -trimpath -ldflags="-s -w" -o "$OUT/adapter.partial" ./cmd/adapter >&2
# Renamed only once whole: an interrupted build leaves no `adapter` the check above would trust.
mv "$OUT/adapter.partial" "$OUT/adapter"
cd "$CACHE_ROOT"
rm -rf "$WORK"
echo "$OUT"
