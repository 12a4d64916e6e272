/*
 * Maps a model file into memory, read-only in effect, as an ArrayBuffer: a replica's weights can
 * then be viewed where the kernel's page cache already holds them instead of copied into a
 * buffer on every load (docs/adr/0021-mapped-weights.md). Node has no mmap of its own.
 *
 * map(path) -> ArrayBuffer; unmap(buffer) detaches the buffer first, so a view left behind reads
 * as empty instead of touching memory that is gone. A buffer never unmapped is unmapped when
 * it is garbage collected.
 */
#define NAPI_VERSION 8
#include <node_api.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  void *addr;
  size_t len;
  bool unmapped;
} mapping;

static void finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)data;
  mapping *m = hint;
  if (!m->unmapped && m->len > 0) munmap(m->addr, m->len);
  free(m);
}

static napi_value fail(napi_env env, const char *what, const char *path, int err) {
  char msg[4200];
  snprintf(msg, sizeof msg, "%s %s: %s", what, path, strerror(err));
  napi_throw_error(env, err == ENOENT ? "ENOENT" : "EMAP", msg);
  return NULL;
}

static napi_value map_file(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  char path[4096];
  size_t n;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_get_value_string_utf8(env, argv[0], path, sizeof path, &n) != napi_ok || n >= sizeof path - 1) {
    napi_throw_type_error(env, NULL, "map(path): path must be a string shorter than 4095 bytes");
    return NULL;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(env, "open", path, errno);
  struct stat st;
  if (fstat(fd, &st) < 0) {
    int err = errno;
    close(fd);
    return fail(env, "stat", path, err);
  }
  size_t len = (size_t)st.st_size;
  void *addr = NULL;
  if (len > 0) {
    /* Private and writable: a stray write lands in a private copy of the page, never in the file
       and never as a crash. */
    addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      close(fd);
      return fail(env, "mmap", path, err);
    }
  }
  close(fd);
  mapping *m = malloc(sizeof *m);
  if (m == NULL) {
    if (len > 0) munmap(addr, len);
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  m->addr = addr;
  m->len = len;
  m->unmapped = false;
  napi_value buffer;
  if (napi_create_external_arraybuffer(env, addr, len, finalize, m, &buffer) != napi_ok) {
    if (len > 0) munmap(addr, len);
    free(m);
    napi_throw_error(env, NULL, "cannot create an external ArrayBuffer");
    return NULL;
  }
  if (napi_wrap(env, buffer, m, NULL, NULL, NULL) != napi_ok) {
    /* The finalizer owns m and the mapping now; without the wrap unmap() could not find it. */
    napi_throw_error(env, NULL, "cannot tag the mapped ArrayBuffer");
    return NULL;
  }
  return buffer;
}

static napi_value unmap_file(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  mapping *m = NULL;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_unwrap(env, argv[0], (void **)&m) != napi_ok || m == NULL) {
    napi_throw_type_error(env, NULL, "unmap(buffer): not a buffer from map()");
    return NULL;
  }
  if (m->unmapped) return NULL;
  if (napi_detach_arraybuffer(env, argv[0]) != napi_ok) {
    napi_throw_error(env, NULL, "cannot detach the mapped ArrayBuffer");
    return NULL;
  }
  if (m->len > 0) munmap(m->addr, m->len);
  m->unmapped = true;
  return NULL;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "map", NAPI_AUTO_LENGTH, map_file, NULL, &fn);
  napi_set_named_property(env, exports, "map", fn);
  napi_create_function(env, "unmap", NAPI_AUTO_LENGTH, unmap_file, NULL, &fn);
  napi_set_named_property(env, exports, "unmap", fn);
  return exports;
}
