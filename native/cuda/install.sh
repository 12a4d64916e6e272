#!/usr/bin/env bash
# Usage: install.sh [DEST]   (npm run install:cuda)
# Installs onnxruntime's CUDA execution provider and the CUDA 13 libraries it needs from the PyPI
# wheels pinned in wheels.lock (pip checks every hash), into DEST/lib: by default a folder of the
# cache outside the clone, reused while the pins stay. Prints DEST/lib on its last line; point
# MODELMUX_CUDA_LIBS at it (docs/adr/0045-cuda-provider-from-wheels.md).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
LOCK="$HERE/wheels.lock"
PY="${PYTHON:-python3}"
# The core library and the providers must be one build: the wheel's onnxruntime must be the one
# onnxruntime-node's binding was built against.
NODE_ORT="$(node -p "require('$HERE/../../node_modules/onnxruntime-node/package.json').version")"
WHEEL_ORT="$(sed -n 's/^onnxruntime-gpu==\([^ ]*\) .*/\1/p' "$LOCK")"
if [ "$NODE_ORT" != "$WHEEL_ORT" ]; then
  echo "install:cuda: wheels.lock pins onnxruntime-gpu $WHEEL_ORT but onnxruntime-node is $NODE_ORT; pin onnxruntime-gpu==$NODE_ORT and its NVIDIA wheels" >&2
  exit 2
fi
# Keyed by the pins and by this script: either changed makes a fresh install.
KEY="$(cat "$LOCK" "$HERE/install.sh" | sha256sum | cut -c1-12)"
DEST="${1:-${MODELMUX_CACHE:-$HOME/.cache/modelmux}/cuda-ort-$NODE_ORT}"
if [ "$(cat "$DEST/.installed" 2>/dev/null)" = "$KEY" ]; then
  echo "$DEST/lib"
  exit 0
fi
WHEELS="$(mktemp -d "${TMPDIR:-/tmp}/modelmux-cuda-wheels.XXXXXX")"
trap 'rm -rf "$WHEELS"' EXIT
# The platform, Python and ABI tags name the wheels the lock pins whatever Python runs pip: only
# their shared libraries are used, which are the same for every Python.
"$PY" -m pip download --quiet --disable-pip-version-check --no-cache-dir --no-deps --require-hashes \
  --only-binary=:all: --implementation cp --python-version 3.11 --abi cp311 --abi none \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux2010_x86_64 --platform manylinux1_x86_64 \
  -r "$LOCK" -d "$WHEELS" >&2
rm -rf "$DEST"
mkdir -p "$DEST/lib"
# Every shared library of the wheels into one folder, where onnxruntime finds its providers next
# to itself and the loader finds the CUDA libraries on the library path. Left out: the Python
# module, and the TensorRT provider, whose TensorRT libraries no pinned wheel brings.
"$PY" - "$WHEELS" "$DEST/lib" <<'PY'
import os, re, shutil, sys, zipfile
wheels, lib = sys.argv[1], sys.argv[2]
for wheel in sorted(os.listdir(wheels)):
    with zipfile.ZipFile(os.path.join(wheels, wheel)) as z:
        for name in z.namelist():
            base = os.path.basename(name)
            if not re.search(r'\.so(\.\d+)*$', base) or 'pybind11' in base or 'tensorrt' in base:
                continue
            target = os.path.join(lib, base)
            if os.path.exists(target):
                sys.exit(f'install:cuda: {base} is in two wheels')
            with z.open(name) as src, open(target, 'wb') as dst:
                shutil.copyfileobj(src, dst)
            os.chmod(target, 0o755)
PY
# onnxruntime-node's binding asks the loader for libonnxruntime.so.1 (its soname).
ln -s "libonnxruntime.so.$NODE_ORT" "$DEST/lib/libonnxruntime.so.1"
echo "$KEY" >"$DEST/.installed"
echo "$DEST/lib"
