#!/usr/bin/env bash
# Installs the test tiers' servers and tools on a fresh machine, from the package registries
# only; binaries built from Go modules go to a cache outside the clone and are reused by later
# runs on the same machine (a fresh machine spends about half an hour building them).
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v openssl >/dev/null 2>&1; then
  apt-get update >&2 && apt-get install -y openssl >&2
fi
# `npm run build` compiles native/file-map.cc (mapped model weights); CI requires it.
if ! command -v c++ >/dev/null 2>&1; then
  apt-get update >&2 && apt-get install -y g++ >&2
fi
bash ./build-control-plane.sh >/dev/null
bash ./build-seaweedfs.sh >/dev/null
bash ./install-kube-tools.sh >/dev/null
bash ./install-mlserver.sh >/dev/null
bash ./install-model-corpus.sh >/dev/null
bash ./install-sagemaker-clients.sh >/dev/null
bash ./build-keda.sh >/dev/null && bash ./install-prometheus.sh >/dev/null
bash ./build-prometheus-adapter.sh >/dev/null
