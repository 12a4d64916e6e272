#!/usr/bin/env bash
# Installs the test tiers' servers and tools on a fresh machine, from the package registries
# only; binaries built from Go modules go to a cache outside the clone and are reused.
set -euo pipefail
cd "$(dirname "$0")"
bash ./build-seaweedfs.sh >/dev/null
bash ./build-control-plane.sh >/dev/null
