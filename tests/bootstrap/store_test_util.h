// Helpers for the store tests: temporary directories and free ports.
#pragma once

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "gw_store.h"

namespace gw::test {

/// A wait only reached when a test is broken.
inline constexpr Nanos kLong = std::chrono::seconds(20);

/// A fresh directory under $TMPDIR (or /tmp), removed with its files on destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/gw_store_test_XXXXXX";
    if (char* p = ::mkdtemp(tmpl.data())) path_ = p;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (path_.empty()) return;
    if (DIR* d = ::opendir(path_.c_str())) {
      while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") ::unlink((path_ + "/" + n).c_str());
      }
      ::closedir(d);
    }
    ::rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// A port that was free a moment ago (a server bound it to port 0 and went away).
inline uint16_t free_port() {
  auto p = pick_store_port();
  return p.ok() ? *p : 0;
}

}  // namespace gw::test
