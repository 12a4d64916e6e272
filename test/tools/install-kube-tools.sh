#!/usr/bin/env bash
# Makes sure the cluster tests' command-line tools exist, from the package registries only:
# kubectl from the machine (else built from the Go module proxy), helm built from the Go module proxy into a cache
# outside the clone keyed by version (reused by later runs on the same machine).
# Prints the helm binary's path on its last line; MODELMUX_HELM, when it names an executable,
# wins and nothing is built.
set -euo pipefail

HELM_VERSION="${MODELMUX_HELM_VERSION:-v3.19.5}"
CACHE_ROOT="${MODELMUX_CACHE:-$HOME/.cache/modelmux}"

if ! command -v kubectl >/dev/null 2>&1; then
  # Debian's own kubectl (kubernetes-client) is 1.20, too old for a 1.34 API server: build
  # the one matching the test control plane from the same Go modules, onto the PATH.
  echo "building kubectl from the Go module proxy" >&2
  cp_dir=$(bash "$(dirname "$0")/build-control-plane.sh" | tail -n 1)
  k8s_version=$(basename "$cp_dir" | sed 's/^control-plane-//')
  (cd "$cp_dir/../control-plane-src-$k8s_version" && CGO_ENABLED=0 go build -trimpath \
    -ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version" \
    -o "$cp_dir/kubectl" k8s.io/kubernetes/cmd/kubectl) >&2
  ln -sf "$cp_dir/kubectl" /usr/local/bin/kubectl
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
