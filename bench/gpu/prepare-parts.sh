#!/usr/bin/env bash
# Builds the parts that carry the GPU check to a device machine (bench/gpu/README.md): the device
# has CUDA 13's libraries (PyTorch's wheels) and no network, and one call carries at most 64 MiB
# with the working tree, so Node, the built tree, the production node_modules and onnxruntime's
# CUDA build travel as xz parts of at most PART_MIB each, one part a call.
#
#   bash bench/gpu/prepare-parts.sh ORT_LIB_DIR
#
# ORT_LIB_DIR holds onnxruntime-gpu 1.30.0's libonnxruntime.so.1.30.0 (or .so.1),
# libonnxruntime_providers_cuda.so and libonnxruntime_providers_shared.so: the `onnxruntime/capi`
# folder of the onnxruntime_gpu wheel unzipped, or what `npm run install:cuda` leaves.
# Writes .gpu-parts/ (ignored): part-1.tar.xz … part-N.tar.xz and MANIFEST (part sizes).
set -euo pipefail

lib=${1:?usage: bash bench/gpu/prepare-parts.sh ORT_LIB_DIR}
root=$(git rev-parse --show-toplevel)
out=$root/.gpu-parts
# Under 64 MiB less the working tree (about 5 MiB) and room for its growth.
part_mib=${PART_MIB:-52}
# The CUDA provider (272 MB) is cut into raw pieces of this size before xz; about 0.65 of it is left.
piece_mib=${PIECE_MIB:-76}
node_dir=${NODE_DIR:-$HOME/.cache/modelmux/node-26.12.1}

core=$lib/libonnxruntime.so.1.30.0
[[ -f $core ]] || core=$lib/libonnxruntime.so.1
for f in "$core" "$lib/libonnxruntime_providers_cuda.so" "$lib/libonnxruntime_providers_shared.so" "$node_dir/bin/node"; do
  [[ -f $f ]] || { echo "missing: $f" >&2; exit 1; }
done
# The device runs the committed tree: what is measured must be a commit (bench/lib/clean-tree.ts).
if [[ -n $(git -C "$root" status --porcelain) ]]; then
  echo "the working tree has uncommitted changes: commit them first, the device clones this commit" >&2
  exit 1
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
rm -rf "$out"
mkdir -p "$out" "$stage/base/lib" "$stage/base/node/bin" "$stage/base/app"

(cd "$root" && npm run build >/dev/null)
git -C "$root" bundle create "$stage/base/src.bundle" HEAD 2>/dev/null
git -C "$root" rev-parse HEAD >"$stage/base/COMMIT"
cp "$node_dir/bin/node" "$stage/base/node/bin/"
cp -r "$root/dist" "$stage/base/app/dist"
cp "$core" "$stage/base/lib/libonnxruntime.so.1"
cp "$lib/libonnxruntime_providers_shared.so" "$stage/base/lib/"

# The production packages only (package-lock.json's entries not marked dev), and of
# onnxruntime-node's binaries only linux/x64's binding: its bundled core library is replaced by
# the CUDA build through LD_LIBRARY_PATH (the binding's RUNPATH is $ORIGIN, which comes after it).
(cd "$root" && node -e '
  const lock = require("./package-lock.json");
  for (const [path, p] of Object.entries(lock.packages)) if (path && !p.dev && !p.devOptional) console.log(path);
') >"$stage/packages"
(cd "$root" && tar -c --exclude='node_modules/onnxruntime-node/bin' -T "$stage/packages") | tar -x -C "$stage/base/app"
mkdir -p "$stage/base/app/node_modules/onnxruntime-node/bin/napi-v6/linux/x64"
cp "$root/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/onnxruntime_binding.node" "$stage/base/app/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/"

# Pieces of the CUDA provider, and every file's digest, checked on the device before it runs.
split -b "${piece_mib}M" -d -a 2 "$lib/libonnxruntime_providers_cuda.so" "$stage/cuda-piece-"
(cd "$stage" && sha256sum cuda-piece-* >base/PIECES.sha256)
sha256sum "$lib/libonnxruntime_providers_cuda.so" | sed 's|  .*|  lib/libonnxruntime_providers_cuda.so|' >"$stage/base/CUDA.sha256"

n=1
tar -C "$stage/base" -c . | xz -9e -T2 >"$out/part-$n.tar.xz"
for piece in "$stage"/cuda-piece-*; do
  n=$((n + 1))
  tar -C "$stage" -c "$(basename "$piece")" | xz -9e -T2 >"$out/part-$n.tar.xz"
done

limit=$((part_mib * 1024 * 1024))
: >"$out/MANIFEST"
for p in "$out"/part-*.tar.xz; do
  size=$(stat -c %s "$p")
  echo "$(basename "$p") $size" >>"$out/MANIFEST"
  ((size <= limit)) || { echo "$(basename "$p") is $size bytes, over ${part_mib} MiB: lower PIECE_MIB" >&2; exit 1; }
done
cat "$out/MANIFEST"
