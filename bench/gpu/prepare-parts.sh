#!/usr/bin/env bash
# Builds the parts that carry the GPU check to a device machine (bench/gpu/README.md). The device
# has CUDA 13's libraries (PyTorch's wheels) and no network, and one call carries at most 64 MiB
# with the working tree; Node, the built tree, the production node_modules and onnxruntime-gpu's
# libraries (the CUDA provider alone is 272 MB) go as one xz stream cut into parts of PART_MIB,
# one part a call, put back together there by bench/gpu/device.sh.
#
#   bash bench/gpu/prepare-parts.sh ORT_LIB_DIR
#
# ORT_LIB_DIR holds onnxruntime-gpu 1.30.0's libonnxruntime.so.1.30.0 (or .so.1),
# libonnxruntime_providers_cuda.so and libonnxruntime_providers_shared.so: the `onnxruntime/capi`
# folder of the onnxruntime_gpu wheel unzipped, or what `npm run install:cuda` leaves.
# Writes .gpu-parts/ (ignored): part-1 … part-N, payload.sha256 and MANIFEST (the parts' sizes).
set -euo pipefail

lib=${1:?usage: bash bench/gpu/prepare-parts.sh ORT_LIB_DIR}
root=$(git rev-parse --show-toplevel)
out=$root/.gpu-parts
# 64 MiB less the working tree (about 5 MiB) and a little room: 4 parts for onnxruntime-gpu 1.30.0.
part_mib=${PART_MIB:-55}
# xz -6: the part count is what costs device time, and -9e saves too little of it to pay for an
# hour of compression on a small machine.
level=${XZ_LEVEL:-6}
node_dir=${NODE_DIR:-$HOME/.cache/modelmux/node-26.12.1}

core=$lib/libonnxruntime.so.1.30.0
[[ -f $core ]] || core=$lib/libonnxruntime.so.1
for f in "$core" "$lib/libonnxruntime_providers_cuda.so" "$lib/libonnxruntime_providers_shared.so" "$node_dir/bin/node"; do
  [[ -f $f ]] || { echo "missing: $f" >&2; exit 1; }
done
# The device runs this commit, cloned from a bundle: what is measured must be a commit
# (bench/lib/clean-tree.ts), and dist/ must be built from it.
if [[ -n $(git -C "$root" status --porcelain) ]]; then
  echo "the working tree has uncommitted changes: commit them first" >&2
  exit 1
fi

stage=$(mktemp -d)
payload=$(mktemp)
trap 'rm -rf "$stage" "$payload"' EXIT
rm -rf "$out"
mkdir -p "$out" "$stage/lib" "$stage/node/bin" "$stage/app"

(cd "$root" && npm run build >/dev/null)
git -C "$root" bundle create "$stage/src.bundle" HEAD 2>/dev/null
git -C "$root" rev-parse HEAD >"$stage/COMMIT"
cp "$node_dir/bin/node" "$stage/node/bin/"
cp -r "$root/dist" "$stage/app/dist"
# The binding asks for libonnxruntime.so.1; the CUDA provider is found beside the core library.
cp "$core" "$stage/lib/libonnxruntime.so.1"
cp "$lib/libonnxruntime_providers_cuda.so" "$lib/libonnxruntime_providers_shared.so" "$stage/lib/"

# The production packages only (package-lock.json's entries not marked dev), and of
# onnxruntime-node's binaries only linux/x64's binding: its bundled core library is replaced by
# the CUDA build through LD_LIBRARY_PATH (the binding's RUNPATH is $ORIGIN, which comes after it).
(cd "$root" && node -e '
  const lock = require("./package-lock.json");
  for (const [path, p] of Object.entries(lock.packages)) if (path && !p.dev && !p.devOptional) console.log(path);
') >"$stage/packages"
(cd "$root" && tar -c --exclude='node_modules/onnxruntime-node/bin' -T "$stage/packages") | tar -x -C "$stage/app"
rm "$stage/packages"
binding=node_modules/onnxruntime-node/bin/napi-v6/linux/x64
mkdir -p "$stage/app/$binding"
cp "$root/$binding/onnxruntime_binding.node" "$stage/app/$binding/"

tar -C "$stage" -c . | xz "-$level" -T2 >"$payload"
echo "$(sha256sum <"$payload" | cut -d' ' -f1)  payload.tar.xz" >"$out/payload.sha256"
split -b "${part_mib}M" --numeric-suffixes=1 -a 1 "$payload" "$out/part-"
[[ -f $out/part-9 ]] && { echo "more than 8 parts: raise PART_MIB or XZ_LEVEL" >&2; exit 1; }
(cd "$out" && stat -c '%n %s' part-*) | tee "$out/MANIFEST"
