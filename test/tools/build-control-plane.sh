#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager and kube-scheduler from the Go module
# proxy into a cache outside the clone, keyed by version, so repeated CI runs on one machine
# reuse them. Prints the directory to use as KUBEBUILDER_ASSETS on its last line.
# KUBEBUILDER_ASSETS, when set and holding the four binaries, wins and nothing is built.
set -euo pipefail

K8S_VERSION="${MODELMUX_K8S_VERSION:-v1.37.2}"
CACHE_ROOT="${MODELMUX_CACHE:-$HOME/.cache/modelmux}"
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler)

have_all() {
  local dir="$1"
  for b in "${BINARIES[@]}"; do [ -x "$dir/$b" ] || return 1; done
}

if [ -n "${KUBEBUILDER_ASSETS:-}" ] && have_all "$KUBEBUILDER_ASSETS"; then
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

OUT="$CACHE_ROOT/control-plane-$K8S_VERSION"
if have_all "$OUT"; then
  echo "$OUT"
  exit 0
fi

STAGING_VERSION="v0.${K8S_VERSION#v1.}"
WORK="$CACHE_ROOT/control-plane-src-$K8S_VERSION"
mkdir -p "$WORK" "$OUT"
cd "$WORK"

echo "building the control plane $K8S_VERSION into $OUT (first run only; takes a while on 2 cores)" >&2

# k8s.io/kubernetes replaces its staging modules with local paths, which Go ignores in a
# dependency: every one of them must be replaced with its published version here.
modfile=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
staging=$(grep -oE '^\s*k8s.io/[a-z0-9-]+ => \./staging' "$modfile" | awk '{print $1}' | sort -u)

{
  echo "module modelmux.io/control-plane"
  echo
  echo "go 1.24"
  echo
  echo "require k8s.io/kubernetes $K8S_VERSION"
  echo
  for m in $staging; do echo "replace $m => $m $STAGING_VERSION"; done
} > go.mod

mkdir -p etcd
cat > etcd/main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO

cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO

etcd_version=$(grep -E '^\s*go.etcd.io/etcd/server/v3 ' "$modfile" | awk '{print $2}' | head -1)
go get "go.etcd.io/etcd/server/v3@${etcd_version}" >&2
go mod tidy >&2

export CGO_ENABLED=0
# component-base's version wants the minor alone ("34"), as Kubernetes' own release builds set it.
minor="${K8S_VERSION#v1.}"
minor="${minor%%.*}"
go build -trimpath -ldflags='-s -w' -o "$OUT/etcd" ./etcd >&2
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  go build -trimpath -ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" -o "$OUT/$c" "k8s.io/kubernetes/cmd/$c" >&2
done
have_all "$OUT"
echo "$OUT"
