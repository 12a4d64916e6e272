# syntax=docker/dockerfile:1
# One image for the three programs: `modelmux replica|router|operator` (and `local`, `models`).
# The operator, the router and the replica pods all run it; the chart passes the subcommand as args.
# `docker build .` makes the CPU image; `docker build --target cuda .` the same image with
# onnxruntime's CUDA provider and NVIDIA's CUDA 13 libraries (docs/adr/0045-cuda-provider-from-wheels.md).

# Node 24 and 26 are the supported (LTS) runtimes; 26 is the one CI runs every tier on.
ARG NODE_IMAGE=node:26-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
# A C++ compiler for native/file-map.cc (the replica maps model files: docs/adr/0021-mapped-weights.md),
# from Debian's packages. Its Node-API headers come from the devDependencies node-api-headers and
# node-addon-api, which `npm ci` installs below; the module builds once for any supported Node.
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ \
 && rm -rf /var/lib/apt/lists/*
# .npmrc keeps onnxruntime-node's install script from downloading anything: the CPU binary ships
# inside the npm package, and a build must not fetch binaries from outside the registry.
COPY package.json package-lock.json .npmrc ./
# --ignore-scripts: the `prepare` script would build before the sources are copied.
RUN npm ci --ignore-scripts
COPY tsconfig.json ./
COPY common ./common
COPY cli ./cli
COPY replica ./replica
COPY router ./router
COPY operator ./operator
COPY native ./native
RUN npx tsc -p tsconfig.json \
 && MODELMUX_REQUIRE_NATIVE=1 node native/build.js \
 && npm prune --omit=dev --ignore-scripts \
 && rm -rf dist/test dist/bench

# The CUDA provider from PyPI by the script `npm run install:cuda` runs: pinned wheels, hashes checked.
FROM build AS cuda-libs
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-pip \
 && rm -rf /var/lib/apt/lists/*
RUN bash native/cuda/install.sh /opt/modelmux-cuda

FROM ${NODE_IMAGE} AS runtime
# HOME: user 10001 has no passwd entry; libraries that look for a home folder get a writable one
# (the chart mounts an emptyDir on /tmp under a read-only root filesystem).
ENV NODE_ENV=production HOME=/tmp
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# tsc emits only .js: the gRPC service's .proto is loaded at run time from the package root
# (common/grpc/inference-service.ts looks there from dist/common/grpc).
COPY --from=build /app/common/grpc/grpc_predict_v2.proto ./common/grpc/grpc_predict_v2.proto
# A numeric non-root user, so the kubelet can verify runAsNonRoot; files stay root-owned and
# read-only to it (the chart also mounts the root filesystem read-only).
USER 10001:10001
# 8080: replica HTTP, 8033: replica gRPC (docs/grpc.md), 8000: router, 8002: router admin (metrics, repository API), 8081: operator metrics and health.
EXPOSE 8080 8033 8000 8002 8081
ENTRYPOINT ["node", "/app/dist/cli/main.js"]
CMD ["--help"]

# The CUDA image: serves `spec.executionProvider: cuda` on a node with NVIDIA's driver and container
# toolkit, which mounts libcuda.so.1 and the devices. LD_LIBRARY_PATH set here, before Node starts,
# makes the binding load the wheel's libonnxruntime.so.1, the providers' own build (no relaunch).
# Which GPUs a container sees is left to the device plugin (`nvidia.com/gpu` limits) or `--gpus`:
# no NVIDIA_VISIBLE_DEVICES=all here, which would hand every GPU to a pod that asked for none.
# `utility` mounts nvidia-smi, which `modelmux doctor` lists the GPUs with.
FROM runtime AS cuda
COPY --from=cuda-libs /opt/modelmux-cuda/lib /opt/modelmux-cuda/lib
ENV MODELMUX_CUDA_LIBS=/opt/modelmux-cuda/lib \
    LD_LIBRARY_PATH=/opt/modelmux-cuda/lib \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

# The default target, last: the CPU image.
FROM runtime
