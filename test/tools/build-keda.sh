#!/usr/bin/env bash
# Builds KEDA's operator (`keda`) and metrics API server (`keda-adapter`) from the Go module
# proxy into a cache outside the clone, keyed by version, with KEDA's CRDs beside them in crd/.
# Prints the directory on its last line. The autoscaling cluster test runs both against the test
# control plane. KEDA's go.mod asks for a newer Go than the machine may have: GOTOOLCHAIN=auto
# fetches that toolchain from the module proxy too (golang.org/toolchain), once.
set -euo pipefail

KEDA_VERSION="${MODELMUX_KEDA_VERSION:-v2.21.1}"
CACHE_ROOT="${MODELMUX_CACHE:-$HOME/.cache/modelmux}"
OUT="$CACHE_ROOT/keda-$KEDA_VERSION"

have_all() {
  [ -x "$OUT/keda" ] && [ -x "$OUT/keda-adapter" ] && [ -f "$OUT/crd/keda.sh_scaledobjects.yaml" ]
}
if have_all; then
  echo "$OUT"
  exit 0
fi

echo "building KEDA $KEDA_VERSION into $OUT (first run only; takes a while on 2 cores)" >&2
export GOTOOLCHAIN=auto
source "$(dirname "$0")/go-module-source.sh"
WORK="$CACHE_ROOT/keda-src-$KEDA_VERSION"
mkdir -p "$OUT/crd"
SRC=$(unpack_go_module github.com/kedacore/keda/v2 "$KEDA_VERSION" "$WORK")
cd "$SRC"

export CGO_ENABLED=0
ldflags="-s -w -X=github.com/kedacore/keda/v2/version.GitCommit=module-proxy -X=github.com/kedacore/keda/v2/version.Version=${KEDA_VERSION#v}"
go build -trimpath -ldflags="$ldflags" -o "$OUT/keda" ./cmd/operator >&2
go build -trimpath -ldflags="$ldflags" -o "$OUT/keda-adapter" ./cmd/adapter >&2
cp config/crd/bases/*.yaml "$OUT/crd/"
cd "$CACHE_ROOT"
rm -rf "$WORK"
have_all
echo "$OUT"
