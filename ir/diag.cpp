#include "ir/diag.h"

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
  std::string src = line(e.loc.line);
  std::string caret;
  for (int i = 1; i < e.loc.col && size_t(i - 1) < src.size(); ++i)
    caret += src[size_t(i - 1)] == '\t' ? '\t' : ' ';
  return fmt::format("{}:{}:{}: error: {}\n{}\n{}^\n", path, e.loc.line, e.loc.col, e.what(), src,
                     caret);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError({}, fmt::format("cannot read '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file_atomic(const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw UserError({}, fmt::format("cannot write '{}'", path));
    out.write(data.data(), std::streamsize(data.size()));
    if (!out) throw UserError({}, fmt::format("cannot write '{}'", path));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw UserError({}, fmt::format("cannot write '{}'", path));
  }
}

}  // namespace gradc
