/*
 * Maps a model file into memory, read-only in effect, as an ArrayBuffer: a replica's weights can
 * then be viewed where the kernel's page cache already holds them instead of copied into a
 * buffer on every load (docs/adr/0021-mapped-weights.md). Node has no mmap of its own.
 *
 * map(path) -> ArrayBuffer; unmap(buffer) detaches the buffer first, so a view left behind reads
 * as empty instead of touching memory that is gone. A buffer never unmapped is unmapped when
 * it is garbage collected.
 *
 * Written on Node-API (through node-addon-api), whose ABI is stable across Node majors: one build
 * loads on every supported Node. Its external ArrayBuffers free through a finalizer, so V8 counts
 * a mapping's bytes as its own external memory until unmap() detaches the buffer, and fresh
 * mappings as its young generation's; what that costs, and why it is accepted, is in
 * docs/adr/0023-mappings-v8-does-not-count.md.
 */
#define NODE_ADDON_API_CPP_EXCEPTIONS
#include <napi.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

namespace {

struct Mapping {
  void* addr;
  size_t length;
};

// Mappings not unmapped yet, by address: how unmap() knows a buffer came from map(), and how the
// finalizer knows whether unmap() already released its mapping. Shared by every worker thread
// that loads the addon, hence the lock.
std::mutex lock;
std::unordered_map<void*, Mapping*> live;

Mapping* Find(void* addr, size_t length) {
  std::lock_guard<std::mutex> guard(lock);
  auto it = live.find(addr);
  return it == live.end() || it->second->length != length ? nullptr : it->second;
}

// Unmaps m unless it was unmapped already. Compared by Mapping, not by address: once unmapped,
// the same address may belong to a later mapping.
void Release(Mapping* m) {
  {
    std::lock_guard<std::mutex> guard(lock);
    auto it = live.find(m->addr);
    if (it == live.end() || it->second != m) return;
    live.erase(it);
  }
  munmap(m->addr, m->length);
}

// Node-API calls it once the buffer is collected, or soon after unmap() detached it (the backing
// store is gone then), or when the thread's environment ends; never before unmap() returns.
void Finalize(Napi::Env, void*, Mapping* m) {
  Release(m);
  delete m;
}

[[noreturn]] void Fail(Napi::Env env, const std::string& message, int err) {
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("code", Napi::String::New(env, err == ENOENT ? "ENOENT" : "EMAP"));
  throw error;
}

Napi::Value Map(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsString()) throw Napi::TypeError::New(env, "map(path): path must be a string");
  std::string path = info[0].As<Napi::String>();
  // open() would stop at a NUL and map another file than the one named.
  if (path.find('\0') != std::string::npos) throw Napi::TypeError::New(env, "map(path): path must not contain NUL");
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Fail(env, "open " + path + ": " + std::strerror(errno), errno);
  struct stat st;
  if (fstat(fd, &st) < 0) {
    int err = errno;
    close(fd);
    Fail(env, "stat " + path + ": " + std::strerror(err), err);
  }
  size_t length = static_cast<size_t>(st.st_size);
  if (length == 0) {
    close(fd);
    return Napi::ArrayBuffer::New(env, 0);
  }
  // Private and writable: a stray write lands in a private copy of the page, never in the file
  // and never as a crash.
  void* addr = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  int err = errno;
  close(fd);
  if (addr == MAP_FAILED) Fail(env, "mmap " + path + ": " + std::strerror(err), err);
  Mapping* m = new Mapping{addr, length};
  {
    std::lock_guard<std::mutex> guard(lock);
    live[addr] = m;
  }
  try {
    return Napi::ArrayBuffer::New(env, addr, length, Finalize, m);
  } catch (const Napi::Error& e) {
    // A Node built with V8's sandbox refuses memory from outside it (napi_no_external_buffers_allowed).
    Release(m);
    delete m;
    Fail(env, "cannot make an ArrayBuffer of the mapping of " + path + ": " + e.Message(), 0);
  }
}

void Unmap(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsArrayBuffer()) throw Napi::TypeError::New(env, "unmap(buffer): not a buffer from map()");
  Napi::ArrayBuffer buffer = info[0].As<Napi::ArrayBuffer>();
  if (buffer.ByteLength() == 0) return;  // empty: an empty file, or unmapped already
  Mapping* m = Find(buffer.Data(), buffer.ByteLength());
  if (m == nullptr) throw Napi::TypeError::New(env, "unmap(buffer): not a buffer from map()");
  buffer.Detach();
  // The finalizer frees m later, and finds nothing left to unmap.
  Release(m);
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("map", Napi::Function::New(env, Map, "map"));
  exports.Set("unmap", Napi::Function::New(env, Unmap, "unmap"));
  return exports;
}

}  // namespace

NODE_API_MODULE(file_map, Init)
