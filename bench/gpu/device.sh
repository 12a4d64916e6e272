#!/usr/bin/env bash
# The GPU check's steps on the device machine, in the repository root there (bench/gpu/README.md):
#
#   bash bench/gpu/device.sh keep .gpu-parts/part-N        # one call per part (bench/gpu/prepare-parts.sh)
#   bash bench/gpu/device.sh run [bench:gpu-check flags]   # once every part is kept; needs .gpu-parts/payload.sha256
#
# Parts are kept outside the repository (MODELMUX_GPU_HOME): carried paths are replaced by each
# call's. They stay only while the machine is warm, 30 s after each call: a cold start loses them.
set -euo pipefail
home=${MODELMUX_GPU_HOME:-/var/tmp/modelmux-gpu}
mkdir -p "$home/parts"
repo=$PWD

# xz may be missing from the image; Python's lzma never is (python3 there holds PyTorch).
unxz_tar() {
  if command -v xz >/dev/null; then
    xz -dc "$1" | tar -x -C "$home"
  else
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1" | tar -x -C "$home"
  fi
}

# The folders of CUDA 13's libraries that onnxruntime's CUDA provider needs, from PyTorch's wheels.
cuda_lib_path() {
  local site names=(-name 'libcublas.so.13' -o -name 'libcublasLt.so.13' -o -name 'libcudart.so.13' -o -name 'libcurand.so.10' -o -name 'libcudnn.so.9')
  site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)
  { find "$site/nvidia" \( "${names[@]}" \) 2>/dev/null || true; } | xargs -r -n1 dirname | awk '!seen[$0]++' | paste -sd:
}

case ${1:-} in
  keep)
    shift
    cp "$@" "$home/parts/"
    ls -l "$home/parts"
    ;;
  run)
    shift
    cd "$home"
    cat parts/part-? >payload.tar.xz
    sha256sum -c "$repo/.gpu-parts/payload.sha256"
    unxz_tar payload.tar.xz
    rm -rf parts payload.tar.xz
    # The commit the parts were built from, cloned so the report names it and finds a clean tree;
    # without git, the carried tree, whose report is marked a development run.
    extra=()
    if command -v git >/dev/null; then
      rm -rf src && git clone -q src.bundle src && git -C src -c advice.detachedHead=false checkout -q "$(cat COMMIT)"
      src=$home/src
    else
      src=$repo
      extra=(--allow-dirty --out "${OUT:-$home}/gpu-check")
    fi
    # Moved, not linked: git ignores node_modules/ as a folder, and a link would dirty the tree.
    rm -rf "$src/node_modules" "$src/dist" && mv app/node_modules app/dist "$src/"
    cuda=$(cuda_lib_path)
    echo "CUDA libraries: ${cuda:-none found}"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
    # Before the process starts: it overrides the binding's own libonnxruntime.so.1 (RUNPATH $ORIGIN).
    export LD_LIBRARY_PATH=$home/lib${cuda:+:$cuda}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PATH=$home/node/bin:$PATH
    cd "$src"
    status=0
    # MODELMUX_GPU_PROVIDER=cpu rehearses the whole recipe on a machine without a GPU.
    node dist/bench/gpu-check.js --provider "${MODELMUX_GPU_PROVIDER:-cuda}" "${extra[@]}" "$@" 2>&1 | tee "${OUT:-.}/gpu-check.log" || status=$?
    cp bench/results/gpu-check.json bench/results/gpu-check.md "${OUT:-.}/" 2>/dev/null || true
    exit "$status"
    ;;
  *)
    echo "usage: bash bench/gpu/device.sh keep PART... | run [bench:gpu-check flags]" >&2
    exit 2
    ;;
esac
