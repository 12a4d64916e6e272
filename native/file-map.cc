/*
 * Maps a model file into memory, read-only in effect, as an ArrayBuffer: a replica's weights can
 * then be viewed where the kernel's page cache already holds them instead of copied into a
 * buffer on every load (docs/adr/0021-mapped-weights.md). Node has no mmap of its own.
 *
 * map(path) -> ArrayBuffer; unmap(buffer) detaches the buffer first, so a view left behind reads
 * as empty instead of touching memory that is gone. A buffer never unmapped is unmapped when
 * it is garbage collected.
 *
 * Written against V8's API, not Node-API, for one reason: Node-API's external ArrayBuffers free
 * through a finalizer, and V8 counts the bytes of such a buffer as memory its young generation
 * holds. With a few 5 MB models loaded, every later allocation of any buffer (each request's
 * body) started a scavenge: 570 minor collections per 2000 loads, 0.15 ms a load. A backing
 * store with an empty deleter frees nothing when collected, so V8 does not count it; the
 * mapping is released here instead, by unmap() or by a weak callback on the buffer.
 */
#include <node.h>
#include <v8.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace {

struct Mapping {
  void* addr;
  size_t length;
  v8::Global<v8::ArrayBuffer> buffer;
};

// Live mappings by address: how unmap() knows a buffer came from map(). Shared by the isolates
// of every worker thread that loads the addon, hence the lock.
std::mutex lock;
std::unordered_map<void*, Mapping*> live;

Mapping* Take(void* addr, size_t length) {
  std::lock_guard<std::mutex> guard(lock);
  auto it = live.find(addr);
  if (it == live.end() || it->second->length != length) return nullptr;
  Mapping* m = it->second;
  live.erase(it);
  return m;
}

void Release(Mapping* m) {
  m->buffer.Reset();
  munmap(m->addr, m->length);
  delete m;
}

void Collected(const v8::WeakCallbackInfo<Mapping>& info) {
  Mapping* m = info.GetParameter();
  if (Take(m->addr, m->length) == m) Release(m);
}

void Throw(v8::Isolate* isolate, const char* code, const std::string& message) {
  v8::Local<v8::Value> error = v8::Exception::Error(v8::String::NewFromUtf8(isolate, message.c_str()).ToLocalChecked());
  v8::Local<v8::Context> context = isolate->GetCurrentContext();
  error.As<v8::Object>()
      ->Set(context, v8::String::NewFromUtf8Literal(isolate, "code"), v8::String::NewFromUtf8(isolate, code).ToLocalChecked())
      .Check();
  isolate->ThrowException(error);
}

void Fail(v8::Isolate* isolate, const char* what, const std::string& path, int err) {
  Throw(isolate, err == ENOENT ? "ENOENT" : "EMAP", std::string(what) + " " + path + ": " + std::strerror(err));
}

void Map(const v8::FunctionCallbackInfo<v8::Value>& args) {
  v8::Isolate* isolate = args.GetIsolate();
  if (args.Length() < 1 || !args[0]->IsString()) {
    isolate->ThrowException(v8::Exception::TypeError(v8::String::NewFromUtf8Literal(isolate, "map(path): path must be a string")));
    return;
  }
  std::string path(*v8::String::Utf8Value(isolate, args[0]));
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Fail(isolate, "open", path, errno);
  struct stat st;
  if (fstat(fd, &st) < 0) {
    int err = errno;
    close(fd);
    return Fail(isolate, "stat", path, err);
  }
  size_t length = static_cast<size_t>(st.st_size);
  if (length == 0) {
    close(fd);
    args.GetReturnValue().Set(v8::ArrayBuffer::New(isolate, 0));
    return;
  }
  // Private and writable: a stray write lands in a private copy of the page, never in the file
  // and never as a crash.
  void* addr = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  int err = errno;
  close(fd);
  if (addr == MAP_FAILED) return Fail(isolate, "mmap", path, err);
  std::unique_ptr<v8::BackingStore> store = v8::ArrayBuffer::NewBackingStore(addr, length, v8::BackingStore::EmptyDeleter, nullptr);
  v8::Local<v8::ArrayBuffer> buffer = v8::ArrayBuffer::New(isolate, std::move(store));
  Mapping* m = new Mapping{addr, length, v8::Global<v8::ArrayBuffer>(isolate, buffer)};
  m->buffer.SetWeak(m, Collected, v8::WeakCallbackType::kParameter);
  {
    std::lock_guard<std::mutex> guard(lock);
    live[addr] = m;
  }
  args.GetReturnValue().Set(buffer);
}

void Unmap(const v8::FunctionCallbackInfo<v8::Value>& args) {
  v8::Isolate* isolate = args.GetIsolate();
  if (args.Length() < 1 || !args[0]->IsArrayBuffer()) {
    isolate->ThrowException(v8::Exception::TypeError(v8::String::NewFromUtf8Literal(isolate, "unmap(buffer): not a buffer from map()")));
    return;
  }
  v8::Local<v8::ArrayBuffer> buffer = args[0].As<v8::ArrayBuffer>();
  size_t length = buffer->ByteLength();
  if (length == 0) return;  // empty: an empty file, or unmapped already
  Mapping* m = Take(buffer->Data(), length);
  if (m == nullptr) {
    isolate->ThrowException(v8::Exception::TypeError(v8::String::NewFromUtf8Literal(isolate, "unmap(buffer): not a buffer from map()")));
    return;
  }
  buffer->Detach(v8::Local<v8::Value>()).Check();
  Release(m);
}

}  // namespace

NODE_MODULE_INIT(/* exports, module, context */) {
  (void)module;
  v8::Isolate* isolate = context->GetIsolate();
  exports->Set(context, v8::String::NewFromUtf8Literal(isolate, "map"), v8::FunctionTemplate::New(isolate, Map)->GetFunction(context).ToLocalChecked()).Check();
  exports->Set(context, v8::String::NewFromUtf8Literal(isolate, "unmap"), v8::FunctionTemplate::New(isolate, Unmap)->GetFunction(context).ToLocalChecked()).Check();
}
