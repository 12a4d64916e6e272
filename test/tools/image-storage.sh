# Sourced by the image scripts: buildah as this machine can run it (no Docker engine, no OCI
# runtime with namespaces: chroot isolation on the vfs driver), its storage in the cache outside
# the clone, so built images survive a fresh clone and a later run reuses them.
# Needs CACHE_ROOT set.
IMAGE_STORE="${MODELMUX_IMAGE_STORE:-$CACHE_ROOT/image-storage}"
command -v buildah >/dev/null 2>&1 || { apt-get update >&2 && apt-get install -y buildah >&2; }
export BUILDAH_ISOLATION=chroot

bah() {
  buildah --root "$IMAGE_STORE/root" --runroot "$IMAGE_STORE/run" --storage-driver vfs "$@"
}

image_exists() {
  bah inspect --type image "$1" >/dev/null 2>&1
}

# The image's size as its layers add up (uncompressed), for the logs.
image_size() {
  bah images --format '{{.Size}}' "$1" 2>/dev/null | head -n 1
}
