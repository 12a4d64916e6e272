#!/usr/bin/env bash
# Uploads the deterministic example models to a bucket, where a MultiplexedDeployment's
# spec.modelSource.uri points: model ID at s3://bucket/prefix/<ID>/model.onnx.
#
#   examples/upload-models.sh s3://models/wine [count] [size-mb]
#
# Credentials come from the usual AWS variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, or a
# profile); for MinIO, SeaweedFS and other S3-compatible servers also set
# MODELMUX_S3_ENDPOINT=http://host:port (path-style addressing is then on by default).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ] || [[ "$1" != s3://* ]]; then
  echo "usage: $0 s3://bucket[/prefix] [count (default 20)] [size-mb (default: about 1 KB each)]" >&2
  exit 2
fi
target="$1"
count="${2:-20}"
args=(models --out "$target" --count "$count")
if [ $# -ge 3 ]; then args+=(--size-mb "$3"); fi

[ -f dist/cli/main.js ] || npm run build >&2
node dist/cli/main.js "${args[@]}"
