#include "ir/diag.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace gradc {

std::string SourceFile::line(int n) const {
  size_t start = 0;
  for (int i = 1; i < n; ++i) {
    start = text.find('\n', start);
    if (start == std::string::npos) return {};
    ++start;
  }
  size_t end = text.find('\n', start);
  return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string SourceFile::format(const UserError& e) const {
  if (!e.loc.known()) return fmt::format("{}: error: {}\n", path, e.what());
  auto located = [&](Loc loc, const char* kind, const std::string& msg) {
    std::string src = line(loc.line);
    std::string caret;
    for (int i = 1; i < loc.col && size_t(i - 1) < src.size(); ++i) caret += src[size_t(i - 1)] == '\t' ? '\t' : ' ';
    return fmt::format("{}:{}:{}: {}: {}\n{}\n{}^\n", path, loc.line, loc.col, kind, msg, src, caret);
  };
  std::string out = located(e.loc, "error", e.what());
  for (const auto& [loc, msg] : e.notes) out += located(loc, "note", msg);
  return out;
}

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
