// memif device arguments and socket handling: jumbo frames, wait for a server's socket,
// clear a stale one.
#include "dpdk_memif.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include "log.h"

namespace gw::drv::dpdk {

std::string vdev_arg(const std::string& vdev, const std::string& key) {
  for (size_t at = vdev.find(';'); at != std::string::npos; at = vdev.find(';', at + 1)) {
    if (vdev.compare(at + 1, key.size() + 1, key + "=") != 0) continue;
    const size_t b = at + 2 + key.size();
    return vdev.substr(b, vdev.find(';', b) - b);
  }
  return "";
}

std::string memif_socket_path(const std::string& vdev) {
  if (vdev.rfind("net_memif", 0) != 0) return "";
  return vdev_arg(vdev, "socket");
}

void prefault_memif_regions() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/memfd:memif_region_") == std::string::npos) continue;
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2 || hi <= lo) continue;
    if (::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_WRITE) != 0) {
      log::get("gw.drv.dpdk")
          ->debug("dpdk: prefaulting memif region {:#x}+{}: {}", lo, hi - lo, std::strerror(errno));
    }
  }
}

std::string vdev_with_defaults(const std::string& vdev, int* mtu) {
  std::string v = vdev;
  std::replace(v.begin(), v.end(), ',', ';');
  auto add = [&](const char* key, const std::string& value) {
    if (vdev_arg(v, key).empty()) v += std::string(";") + key + "=" + value;
  };
  if (v.rfind("net_af_packet", 0) == 0) add("framecnt", "2048");
  if (v.rfind("net_memif", 0) != 0) return v;
  // A path in the file system, as the user wrote it.
  if (!vdev_arg(v, "socket").empty()) add("socket-abstract", "no");
  if (*mtu == 0) *mtu = kMemifJumboMtu;
  *mtu = std::min(*mtu, kMemifMaxMtu);
  if (*mtu <= 1500) {
    add("rsize", "11");  // room for a whole window (1024 packets) plus its acks
    return v;
  }
  // One descriptor per frame (Ethernet header included), rounded to cache lines. A ring
  // carries one direction's data (the acks ride the other): a window of jumbo frames (128
  // packets, up to 512 asked for) fits 1024 descriptors, and the shared region is 2 rings x
  // 1024 x 32 KiB = 64 MiB, mapped in both processes. 512 descriptors measured 0-20 % slower
  // at 1 MiB and 8 MiB (noisy).
  add("bsize", std::to_string((*mtu + 14 + 127) / 128 * 128));
  add("rsize", "10");
  return v;
}

void wait_for_memif_server(const std::string& vdev) {
  if (vdev.find("role=client") == std::string::npos) return;
  std::string path = memif_socket_path(vdev);
  if (path.empty()) return;
  for (int i = 0; i < 1000 && ::access(path.c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

Status claim_memif_socket(const std::string& vdev) {
  if (vdev.find("role=server") == std::string::npos) return Status();
  std::string path = memif_socket_path(vdev);
  struct stat st {};
  if (path.empty() || ::lstat(path.c_str(), &st) != 0) return Status();
  if (!S_ISSOCK(st.st_mode)) {
    return Status(Code::kInvalidArgument,
                  "dpdk: memif socket path " + path +
                      " exists and is not a socket; remove it or choose another socket=");
  }
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof(a.sun_path)) {
    return Status(Code::kInvalidArgument, "dpdk: memif socket path " + path + " is longer than " +
                                              std::to_string(sizeof(a.sun_path) - 1) + " bytes");
  }
  std::memcpy(a.sun_path, path.c_str(), path.size());
  // memif's control channel is SOCK_SEQPACKET; probing with the same type avoids a false
  // "stale" from a type mismatch.
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status(Code::kSystemError, "dpdk: socket(AF_UNIX) to probe " + path, errno);
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  int err = errno;
  ::close(fd);
  if (rc == 0) {
    return Status(Code::kUnavailable,
                  "dpdk: memif socket " + path +
                      " has a live server (another run uses it); stop that run or choose "
                      "another socket= path");
  }
  if (err != ECONNREFUSED) {
    return Status(Code::kSystemError, "dpdk: probing memif socket " + path, err);
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return Status(Code::kSystemError, "dpdk: removing stale memif socket " + path, errno);
  log::get("gw.drv.dpdk")
      ->info("dpdk: removed stale memif socket {} (no server listened on it)", path);
  return Status();
}

}  // namespace gw::drv::dpdk
