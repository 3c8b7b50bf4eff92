// Loading the plugin as NCCL does, the handle exchange and the connect/accept loop.
#include "harness_net.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace gw::nccltest {
namespace {

int g_rank = -1;

void logger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  static const bool verbose = std::getenv("GW_NCCL_HARNESS_VERBOSE") != nullptr;
  if (level > NCCL_LOG_WARN && !verbose) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "[rank %d] NCCL %s %s\n", g_rank, level <= NCCL_LOG_WARN ? "WARN" : "INFO",
               buf);
}

long now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

void write_file(const std::string& path, const void* data, size_t n) {
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  CHECK(f && std::fwrite(data, 1, n, f) == n && std::fclose(f) == 0, "cannot write %s",
        tmp.c_str());
  CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename %s", tmp.c_str());
}

bool read_file(const std::string& path, void* data, size_t n) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  size_t got = std::fread(data, 1, n, f);
  std::fclose(f);
  return got == n;
}

}  // namespace

void die(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "[rank %d] FAIL: %s\n", g_rank, buf);
  std::fflush(stderr);
  _exit(1);
}

Net::Net(const std::string& path, int version, int rank) : version_(version), rank_(rank) {
  g_rank = rank;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  CHECK(h, "dlopen(%s): %s", path.c_str(), dlerror());
  // NCCL looks for the newest symbol it knows first; both must be there.
  v8_ = static_cast<ncclNet_v8_t*>(dlsym(h, "ncclNetPlugin_v8"));
  v12_ = static_cast<ncclNet_v12_t*>(dlsym(h, "ncclNetPlugin_v12"));
  CHECK(v8_ && v12_, "%s lacks ncclNetPlugin_v8 or ncclNetPlugin_v12", path.c_str());
  CHECK(version == 8 || version == 12, "version must be 8 or 12");
  CHECK(std::strcmp(version == 8 ? v8_->name : v12_->name, "gradwire") == 0, "name");
}

ncclResult_t Net::init() {
  if (version_ == 8) return v8_->init(logger);
  return v12_->init(&ctx_, 0x1234, nullptr, logger, nullptr);
}
ncclResult_t Net::devices(int* n) { return version_ == 8 ? v8_->devices(n) : v12_->devices(n); }

ncclResult_t Net::props(int dev, std::string* name, int* ptr, int* speed, int* max_recvs) {
  ncclResult_t r;
  if (version_ == 8) {
    ncclNetProperties_v8_t p;
    r = v8_->getProperties(dev, &p);
    if (r == ncclSuccess)
      *name = p.name, *ptr = p.ptrSupport, *speed = p.speed, *max_recvs = p.maxRecvs;
  } else {
    ncclNetProperties_v12_t p;
    r = v12_->getProperties(dev, &p);
    if (r == ncclSuccess)
      *name = p.name, *ptr = p.ptrSupport, *speed = p.speed, *max_recvs = p.maxRecvs;
    CHECK(r != ncclSuccess || (p.vProps.ndevs == 1 && p.maxP2pBytes > 0 && p.regIsGlobal == 1),
          "v12 properties incomplete");
  }
  return r;
}

ncclResult_t Net::listen(int dev, void* handle, void** lc) {
  return version_ == 8 ? v8_->listen(dev, handle, lc) : v12_->listen(ctx_, dev, handle, lc);
}
ncclResult_t Net::connect(int dev, void* handle, void** sc) {
  if (version_ == 8) {
    ncclNetDeviceHandle_v8_t* dh = nullptr;
    return v8_->connect(dev, handle, sc, &dh);
  }
  ncclNetDeviceHandle_v12_t* dh = nullptr;
  return v12_->connect(ctx_, dev, handle, sc, &dh);
}
ncclResult_t Net::accept(void* lc, void** rc) {
  if (version_ == 8) {
    ncclNetDeviceHandle_v8_t* dh = nullptr;
    return v8_->accept(lc, rc, &dh);
  }
  ncclNetDeviceHandle_v12_t* dh = nullptr;
  return v12_->accept(lc, rc, &dh);
}
ncclResult_t Net::reg_mr(void* comm, void* data, size_t size, int type, void** mh) {
  return version_ == 8 ? v8_->regMr(comm, data, size, type, mh)
                       : v12_->regMr(comm, data, size, type, mh);
}
ncclResult_t Net::reg_mr_dmabuf(void* comm, void* data, size_t size, int type, int fd, void** mh) {
  return version_ == 8 ? v8_->regMrDmaBuf(comm, data, size, type, 0, fd, mh)
                       : v12_->regMrDmaBuf(comm, data, size, type, 0, fd, mh);
}
ncclResult_t Net::dereg_mr(void* comm, void* mh) {
  return version_ == 8 ? v8_->deregMr(comm, mh) : v12_->deregMr(comm, mh);
}
ncclResult_t Net::isend(void* sc, void* data, size_t size, int tag, void* mh, void** req) {
  if (version_ == 8) return v8_->isend(sc, data, static_cast<int>(size), tag, mh, req);
  return v12_->isend(sc, data, size, tag, mh, nullptr, req);
}
ncclResult_t Net::irecv(void* rc, int n, void** data, const size_t* sizes, const int* tags,
                        void** mhs, void** req) {
  if (version_ == 8) {
    int s[8];
    for (int i = 0; i < n && i < 8; ++i) s[i] = static_cast<int>(sizes[i]);
    return v8_->irecv(rc, n, data, s, const_cast<int*>(tags), mhs, req);
  }
  return v12_->irecv(rc, n, data, const_cast<size_t*>(sizes), const_cast<int*>(tags), mhs, nullptr,
                     req);
}
ncclResult_t Net::iflush(void* rc, int n, void** data, int* sizes, void** mhs, void** req) {
  return version_ == 8 ? v8_->iflush(rc, n, data, sizes, mhs, req)
                       : v12_->iflush(rc, n, data, sizes, mhs, req);
}
ncclResult_t Net::test(void* req, int* done, int* sizes) {
  return version_ == 8 ? v8_->test(req, done, sizes) : v12_->test(req, done, sizes);
}
ncclResult_t Net::close_send(void* sc) {
  return version_ == 8 ? v8_->closeSend(sc) : v12_->closeSend(sc);
}
ncclResult_t Net::close_recv(void* rc) {
  return version_ == 8 ? v8_->closeRecv(rc) : v12_->closeRecv(rc);
}
ncclResult_t Net::close_listen(void* lc) {
  return version_ == 8 ? v8_->closeListen(lc) : v12_->closeListen(lc);
}

Mesh connect_mesh(Net& net, const std::string& dir, int ranks, int timeout_ms,
                  const std::string& name) {
  const int me = net.rank();
  Mesh m;
  m.send.assign(ranks, nullptr);
  m.recv.assign(ranks, nullptr);
  m.listen.assign(ranks, nullptr);
  // NCCL passes the same handle buffer to every connect() call of one connection.
  std::vector<std::vector<char>> handles(ranks, std::vector<char>(GW_NCCL_HANDLE_MAXSIZE));
  std::vector<bool> have(ranks, false);
  for (int p = 0; p < ranks; ++p) {
    if (p == me) continue;
    char h[GW_NCCL_HANDLE_MAXSIZE] = {};
    CHECK(net.listen(0, h, &m.listen[p]) == ncclSuccess, "listen for rank %d", p);
    write_file(dir + "/" + name + "." + std::to_string(me) + "." + std::to_string(p), h, sizeof h);
  }
  const long end = now_ms() + timeout_ms;
  for (int pending = 2 * (ranks - 1); pending > 0;) {
    CHECK(now_ms() < end, "connect/accept not done after %d ms", timeout_ms);
    int progress = 0;
    for (int p = 0; p < ranks; ++p) {
      if (p == me) continue;
      if (!have[p]) {
        have[p] = read_file(dir + "/" + name + "." + std::to_string(p) + "." + std::to_string(me),
                            handles[p].data(), GW_NCCL_HANDLE_MAXSIZE);
      }
      if (have[p] && !m.send[p]) {
        CHECK(net.connect(0, handles[p].data(), &m.send[p]) == ncclSuccess, "connect to %d", p);
        if (m.send[p]) --pending, ++progress;
      }
      if (!m.recv[p]) {
        CHECK(net.accept(m.listen[p], &m.recv[p]) == ncclSuccess, "accept from %d", p);
        if (m.recv[p]) --pending, ++progress;
      }
    }
    if (!progress) usleep(200);
  }
  return m;
}

void close_mesh(Net& net, Mesh& m) {
  for (size_t p = 0; p < m.send.size(); ++p) {
    if (m.send[p]) CHECK(net.close_send(m.send[p]) == ncclSuccess, "closeSend");
    if (m.recv[p]) CHECK(net.close_recv(m.recv[p]) == ncclSuccess, "closeRecv");
    if (m.listen[p]) CHECK(net.close_listen(m.listen[p]) == ncclSuccess, "closeListen");
  }
  m = Mesh{};
}

void barrier(const std::string& dir, const std::string& name, int rank, int ranks, int timeout_ms) {
  char one = 1;
  write_file(dir + "/" + name + "." + std::to_string(rank), &one, 1);
  const long end = now_ms() + timeout_ms;
  for (int r = 0; r < ranks; ++r) {
    struct stat st;
    while (::stat((dir + "/" + name + "." + std::to_string(r)).c_str(), &st) != 0) {
      CHECK(now_ms() < end, "barrier %s: rank %d missing after %d ms", name.c_str(), r, timeout_ms);
      usleep(500);
    }
  }
}

ncclResult_t wait(Net& net, void* req, int* sizes, bool spin, int timeout_ms) {
  const long end = now_ms() + timeout_ms;
  for (long i = 0;; ++i) {
    int done = 0;
    ncclResult_t r = net.test(req, &done, sizes);
    if (r != ncclSuccess || done) return r;
    if (!spin && i > 64) usleep(20);  // spin: as NCCL's proxy thread, and gw-perf --busy
    if ((i & 255) == 0) CHECK(now_ms() < end, "request not done after %d ms", timeout_ms);
  }
}

}  // namespace gw::nccltest
