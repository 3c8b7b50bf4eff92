// File store: one file per key in a directory. set() writes a temporary file and renames it
// over the key's file (readers see the old or the new value, never a torn one); add() holds an
// flock on a lock file so that read-modify-write is atomic across threads and processes.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gw_store.h"
#include "store_util.h"

namespace gw {
namespace {

Status sys_error(const std::string& what, int err) {
  return Status(Code::kSystemError, "file store: " + what + ": " + std::strerror(err), err);
}

uint64_t fnv1a(std::string_view s, uint64_t h) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

/// Owns a file descriptor.
class FileFd {
 public:
  explicit FileFd(int fd) : fd_(fd) {}
  FileFd(const FileFd&) = delete;
  FileFd& operator=(const FileFd&) = delete;
  ~FileFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

/// Thread-safety: no in-memory state besides the directory name; the file system and flock
/// give the atomicity.
class FileStore final : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}

  Status set(std::string_view key, std::string_view value) override {
    GW_RETURN_IF_ERROR(store::check_sizes("file store", key, value));
    return write_atomic(path_of(key), value);
  }

  Result<std::string> get(std::string_view key, Nanos timeout) override {
    std::string value, path = path_of(key);
    auto found = store::poll_until([&]() { return read_file(path, &value); }, timeout);
    if (!found.ok()) return found.status();
    if (!*found) {
      std::string k(key);
      return store::missing_keys_timeout("file store " + dir_, {&k, 1}, timeout);
    }
    return value;
  }

  Result<int64_t> add(std::string_view key, int64_t delta) override {
    std::string lock_path = dir_ + "/lock";
    FileFd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (lock.get() < 0) return sys_error("open " + lock_path, errno);
    while (::flock(lock.get(), LOCK_EX) != 0) {
      if (errno != EINTR) return sys_error("flock " + lock_path, errno);
    }
    // The lock is released when `lock` closes.
    std::string path = path_of(key), old;
    GW_ASSIGN_OR_RETURN(bool exists, read_file(path, &old));
    int64_t v = 0;
    if (exists) {
      GW_ASSIGN_OR_RETURN(v, store::parse_counter("file store", key, old));
    }
    GW_ASSIGN_OR_RETURN(v, store::add_checked("file store", key, v, delta));
    GW_RETURN_IF_ERROR(write_atomic(path, std::to_string(v)));
    return v;
  }

  Status wait(std::span<const std::string> keys, Nanos timeout) override {
    auto all = store::poll_until([&]() { return check(keys); }, timeout);
    if (!all.ok()) return all.status();
    if (*all) return Status();
    std::vector<std::string> missing;
    for (auto& k : keys)
      if (::access(path_of(k).c_str(), F_OK) != 0) missing.push_back(k);
    return store::missing_keys_timeout("file store " + dir_, missing, timeout);
  }

  Result<bool> check(std::span<const std::string> keys) override {
    for (auto& k : keys) {
      std::string p = path_of(k);
      if (::access(p.c_str(), F_OK) == 0) continue;
      if (errno == ENOENT) return false;
      return sys_error("access " + p, errno);
    }
    return true;
  }

 private:
  // Keys are arbitrary bytes: safe characters stay, others become %XX; names too long for the
  // file system become a 128-bit hash. "k_" keeps them apart from temporaries and the lock.
  std::string path_of(std::string_view key) const {
    static constexpr char kHex[] = "0123456789ABCDEF";
    static constexpr size_t kMaxName = 200;
    std::string name = "k_";
    for (unsigned char c : key) {
      if (std::isalnum(c) || c == '-' || c == '_' || c == '.') {
        name += static_cast<char>(c);
      } else {
        name += '%';
        name += kHex[c >> 4];
        name += kHex[c & 15];
      }
      if (name.size() > kMaxName) break;
    }
    if (name.size() > kMaxName) {
      char buf[40];
      std::snprintf(buf, sizeof buf, "h_%016llx%016llx",
                    static_cast<unsigned long long>(fnv1a(key, 0xcbf29ce484222325ULL)),
                    static_cast<unsigned long long>(fnv1a(key, 0x84222325cbf29ce4ULL)));
      name = buf;
    }
    return dir_ + "/" + name;
  }

  // @return false when the file does not exist.
  Result<bool> read_file(const std::string& path, std::string* out) const {
    FileFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == ENOENT) return false;
      return sys_error("open " + path, errno);
    }
    out->clear();
    char buf[64 * 1024];
    for (;;) {
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n == 0) return true;
      if (n < 0) {
        if (errno == EINTR) continue;
        return sys_error("read " + path, errno);
      }
      out->append(buf, static_cast<size_t>(n));
    }
  }

  Status write_atomic(const std::string& path, std::string_view value) const {
    static std::atomic<uint64_t> counter{0};
    std::string tmp =
        dir_ + "/tmp_" + std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1));
    {
      FileFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      if (fd.get() < 0) return sys_error("create " + tmp, errno);
      size_t off = 0;
      while (off < value.size()) {
        ssize_t n = ::write(fd.get(), value.data() + off, value.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          int err = errno;
          ::unlink(tmp.c_str());
          return sys_error("write " + tmp, err);
        }
        off += static_cast<size_t>(n);
      }
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      return sys_error("rename " + tmp + " to " + path, err);
    }
    return Status();
  }

  std::string dir_;
};

}  // namespace

Result<std::shared_ptr<Store>> make_file_store(const std::string& dir) {
  if (dir.empty()) return Status(Code::kInvalidArgument, "file store: empty directory name");
  // mkdir -p: create each missing component.
  for (size_t pos = 1; pos != std::string::npos;) {
    pos = dir.find('/', pos);
    std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      return sys_error("cannot create directory " + part, errno);
    }
    if (pos != std::string::npos) ++pos;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return sys_error("stat " + dir, errno);
  if (!S_ISDIR(st.st_mode)) {
    return Status(Code::kInvalidArgument, "file store: " + dir + " exists but is not a directory");
  }
  return std::shared_ptr<Store>(std::make_shared<FileStore>(dir));
}

}  // namespace gw
