#!/usr/bin/env bash
# Builds the project's Dockerfile, unchanged, as a user's `docker build` would, with buildah (no
# Docker engine here), on the base test/tools/build-node-base.sh builds from the package registries
# (the Dockerfile's NODE_IMAGE points at it), then unpacks the image's root filesystem for the
# image tier (test/image/) to run as the chart runs it.
# Cached by the hash of what goes in (the Dockerfile, every path it COPYs from the context, these
# scripts, extra buildah arguments): an unchanged tree prints the folder and builds nothing; a new
# Node release (a new base) rebuilds into the same folder.
# Usage: build-image.sh [--print-path] [-- BUILDAH_BUD_ARGS...]
#   --print-path  print the folder this tree's image unpacks to and stop (no network, no build);
#                 it holds rootfs/ and image.json once built.
#   after --:     passed on to `buildah bud` and hashed, e.g. a target or build argument of another
#                 variant of the image (docs/testing.md).
# Prints the folder on its last line.
set -euo pipefail
cd "$(dirname "$0")"
tools=$PWD
repo=$(cd ../.. && pwd)

print_path=0
bud_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --print-path) print_path=1 ;;
    --) shift; bud_args=("$@"); break ;;
    *) echo "usage: build-image.sh [--print-path] [-- BUILDAH_BUD_ARGS...]" >&2; exit 2 ;;
  esac
  shift
done
CACHE_ROOT="${MODELMUX_CACHE:-$HOME/.cache/modelmux}"

# Every source a COPY (not COPY --from) names, as the Dockerfile names them, so a COPY added there is hashed too.
sources=$(cd "$repo" && awk '/^COPY / && !/--from/ { for (i = 2; i < NF; i++) if ($i !~ /^--/) print $i }' Dockerfile | sort -u)
# shellcheck disable=SC2086 # the sources are one path a line, none with spaces
key=$(
  cd "$repo"
  {
    printf '%s\n' "${bud_args[@]+"${bud_args[@]}"}"
    cat Dockerfile .dockerignore "$tools/build-image.sh" "$tools/build-node-base.sh" "$tools/image-storage.sh"
    find $sources -type f -print0 | sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-12
)
OUT="$CACHE_ROOT/image-$key"
if [ "$print_path" = 1 ]; then
  echo "$OUT"
  exit 0
fi

base=$(bash "$tools/build-node-base.sh" 26 | tail -n 1)
# shellcheck source=image-storage.sh
source "$tools/image-storage.sh"
tag="localhost/modelmux:$key"
if [ -f "$OUT/image.json" ] && [ "$(cat "$OUT/base")" = "$base" ] && image_exists "$tag"; then
  echo "build-image: $tag is built for this tree (on $base), $(image_size "$tag")" >&2
  echo "$OUT"
  exit 0
fi

started=$(date +%s)
echo "build-image: building $tag from $repo on $base" >&2
mkdir -p "$CACHE_ROOT"
work=$(mktemp -d "$CACHE_ROOT/image-build.XXXXXX")
ctr=""
cleanup() {
  [ -z "$ctr" ] || bah rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
# The build reaches the package registries as this machine does: buildah passes the proxy
# variables on (--http-proxy, its default), and the npm registry this machine uses and the CA
# bundle its Node trusts (NODE_EXTRA_CA_CERTS: a TLS-intercepting egress proxy signs with a CA of
# its own) reach npm as a user .npmrc and pip (the CUDA target's wheels) as /etc/pip.conf, files
# mounted into each RUN of the build only: never in the image.
npmrc=""
pipconf=""
registry=$(cd "$repo" && npm config get registry 2>/dev/null || true)
[ -z "$registry" ] || [ "$registry" = "https://registry.npmjs.org/" ] || npmrc+="registry=$registry"$'\n'
[ -z "${PIP_INDEX_URL:-}" ] || pipconf+="index-url = $PIP_INDEX_URL"$'\n'
cafile="${MODELMUX_IMAGE_BUILD_CA:-${NODE_EXTRA_CA_CERTS:-}}"
if [ -n "$cafile" ] && [ -f "$cafile" ]; then
  cp "$cafile" "$work/ca.crt"
  npmrc+="cafile=/root/.build-ca.crt"$'\n'
  pipconf+="cert = /root/.build-ca.crt"$'\n'
  bud_args=(--volume "$work/ca.crt:/root/.build-ca.crt:ro" "${bud_args[@]+"${bud_args[@]}"}")
fi
if [ -n "$npmrc" ]; then
  printf '%s' "$npmrc" >"$work/npmrc"
  bud_args=(--volume "$work/npmrc:/root/.npmrc:ro" "${bud_args[@]+"${bud_args[@]}"}")
fi
if [ -n "$pipconf" ]; then
  printf '[global]\n%s' "$pipconf" >"$work/pip.conf"
  bud_args=(--volume "$work/pip.conf:/etc/pip.conf:ro" "${bud_args[@]+"${bud_args[@]}"}")
fi
bah bud --isolation chroot --build-arg NODE_IMAGE="$base" --tag "$tag" --file "$repo/Dockerfile" \
  "${bud_args[@]+"${bud_args[@]}"}" "$repo" >"$work/build.log" 2>&1 || {
  tail -n 40 "$work/build.log" >&2
  cp "$work/build.log" "$CACHE_ROOT/image-build-failed.log"
  echo "build-image: buildah bud failed; its whole log: $CACHE_ROOT/image-build-failed.log" >&2
  exit 1
}
built=$(date +%s)
# buildah 1.28 leaves behind the working container of a last stage that adds no instruction (the
# Dockerfile's closing `FROM runtime`), a full copy of the image on vfs.
bah containers --all --quiet --filter ancestor="$tag" | while read -r leftover; do bah rm "$leftover" >/dev/null; done

# The root filesystem as the container runtime would see it, and the image's config (user,
# entrypoint, env, working directory), for the image tier.
rm -rf "$OUT.tmp" && mkdir -p "$OUT.tmp/rootfs"
ctr=$(bah from --pull-never "$tag")
cp -a "$(bah mount "$ctr")/." "$OUT.tmp/rootfs/"
bah umount "$ctr" >/dev/null
bah rm "$ctr" >/dev/null
ctr=""
bah inspect --type image "$tag" >"$OUT.tmp/image.json"
echo "$base" >"$OUT.tmp/base"
cp "$work/build.log" "$OUT.tmp/build.log"
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
# Unpacked trees of older trees' images go, the newest few kept (each is a few hundred MB).
# Only folders named by a key: a build's work folder (image-build.*) may be another build's, running.
# shellcheck disable=SC2012 # the cache's own folder names, no odd characters
ls -1dt "$CACHE_ROOT"/image-* | { grep -E '/image-[0-9a-f]{12}$' || true; } | tail -n +4 | while read -r old; do
  bah rmi --force "localhost/modelmux:${old##*/image-}" >/dev/null 2>&1 || true
  rm -rf "$old"
done
echo "build-image: built $tag in $((built - started)) s (unpacked in $(($(date +%s) - built)) s), $(image_size "$tag"), root filesystem $(du -sh "$OUT/rootfs" | cut -f1)" >&2
echo "$OUT"
