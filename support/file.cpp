#include "support/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "support/diag.h"

namespace gradc {

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError({}, fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw UserError({}, fmt::format("'{}' is a directory, not a file", path));
  }
  std::string data;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      throw UserError({}, fmt::format("cannot read '{}': {}", path, std::strerror(err)));
    }
    data.append(buf, size_t(n));
  }
  ::close(fd);
  return data;
}

namespace {
// Writes `data` to `path` (created or truncated); returns 0 or the errno of the failure.
int write_whole(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      return err;
    }
    done += size_t(n);
  }
  return ::close(fd) == 0 ? 0 : errno;
}
}  // namespace

void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files) {
  // Every file is written under a temporary name first; only when all of them
  // are complete does each take its name, so a failure leaves none behind.
  std::vector<std::string> staged;
  auto discard = [&] {
    for (const std::string& t : staged) ::unlink(t.c_str());
  };
  for (const auto& [path, data] : files) {
    std::string tmp = path + ".gradc-tmp";
    int err = write_whole(tmp, data);
    if (err) {
      ::unlink(tmp.c_str());
      discard();
      throw UserError({}, fmt::format("cannot write '{}': {}", path, std::strerror(err)));
    }
    staged.push_back(tmp);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (std::rename(staged[i].c_str(), files[i].first.c_str()) != 0) {
      int err = errno;
      for (size_t k = 0; k < i; ++k) ::unlink(files[k].first.c_str());
      staged.erase(staged.begin(), staged.begin() + long(i));
      discard();
      throw UserError({}, fmt::format("cannot write '{}': {}", files[i].first, std::strerror(err)));
    }
  }
}

void write_file_atomic(const std::string& path, const std::string& data) { write_files_atomic({{path, data}}); }

}  // namespace gradc
