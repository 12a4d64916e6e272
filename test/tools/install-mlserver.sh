#!/usr/bin/env bash
# Installs MLServer (the serving runtime of the sidecar tests) with its scikit-learn and XGBoost
# runtimes from PyPI into a venv outside the clone, keyed by the pinned versions so a changed pin
# makes a new venv and an unchanged one is reused (a fresh install takes about a minute and a half).
# Prints the venv's bin folder on its last line.
set -euo pipefail
CACHE_ROOT="${MODELMUX_CACHE:-$HOME/.cache/modelmux}"
PINS=(mlserver==1.7.1 mlserver-sklearn==1.7.1 mlserver-xgboost==1.7.1 scikit-learn==1.9.1 xgboost==3.2.0 numpy==2.4.6 pandas==3.1.1)
KEY="$(printf '%s\n' "${PINS[@]}" | sha256sum | cut -c1-12)"
VENV="$CACHE_ROOT/mlserver-venv/$KEY"
if [ ! -f "$VENV/.installed" ]; then
  PY="${PYTHON:-python3}"
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "${PINS[@]}" >&2
  touch "$VENV/.installed"
fi
"$VENV/bin/python" -c 'import mlserver, mlserver_sklearn, mlserver_xgboost, sklearn, xgboost' >&2
echo "$VENV/bin"
