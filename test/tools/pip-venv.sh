#!/usr/bin/env bash
# Usage: pip-venv.sh NAME IMPORTS PIN...
# Installs the pinned PyPI packages into a venv outside the clone, keyed by the pins so a changed
# pin makes a new venv and an unchanged one is reused, checks that IMPORTS (a Python import
# statement) runs in it, and prints the venv's bin folder on its last line.
set -euo pipefail
NAME="$1" IMPORTS="$2"
shift 2
CACHE_ROOT="${MODELMUX_CACHE:-$HOME/.cache/modelmux}"
KEY="$(printf '%s\n' "$@" | sha256sum | cut -c1-12)"
VENV="$CACHE_ROOT/$NAME/$KEY"
if [ ! -f "$VENV/.installed" ]; then
  PY="${PYTHON:-python3}"
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "$@" >&2
  touch "$VENV/.installed"
fi
"$VENV/bin/python" -c "$IMPORTS" >&2
echo "$VENV/bin"
