#!/usr/bin/env bash
# Makes sure the cluster tests' command-line tools exist, from the package registries only:
# kubectl from Debian's `kubectl` package, helm built from the Go module proxy into a cache
# outside the clone keyed by version (reused by later runs on the same machine).
# Prints the helm binary's path on its last line; MODELMUX_HELM, when it names an executable,
# wins and nothing is built.
set -euo pipefail

HELM_VERSION="${MODELMUX_HELM_VERSION:-v3.19.5}"
CACHE_ROOT="${MODELMUX_CACHE:-$HOME/.cache/modelmux}"

if ! command -v kubectl >/dev/null 2>&1; then
  echo "installing kubectl from Debian" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update >&2
  $SUDO apt-get install -y kubectl >&2
fi

if [ -n "${MODELMUX_HELM:-}" ] && [ -x "$MODELMUX_HELM" ]; then
  echo "$MODELMUX_HELM"
  exit 0
fi

OUT="$CACHE_ROOT/helm-$HELM_VERSION"
if [ -x "$OUT/helm" ]; then
  echo "$OUT/helm"
  exit 0
fi

echo "building helm $HELM_VERSION into $OUT (first run only)" >&2
mkdir -p "$OUT"
# helm's go.mod has no replace directives, so `go install module@version` builds it as released;
# the ldflag sets what `helm version` reports (its Makefile does the same).
GOBIN="$OUT" CGO_ENABLED=0 go install -trimpath \
  -ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
[ -x "$OUT/helm" ]
echo "$OUT/helm"
