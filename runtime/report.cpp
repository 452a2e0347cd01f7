#include "runtime/report.h"

#include <fmt/format.h>

#include <cmath>

#include "ir/mesh.h"

namespace gradc {

namespace {
template <class T>
std::string number_of(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  }
  return fmt::format("{}", v);
}
}  // namespace

std::string number_str(const Tensor& t, int64_t i) {
  // bf16 and f16: the f32 value they hold (the shortest text that reads back as it)
  if (is_low_precision(t.dtype())) return number_of(float(t.get(i)));
  return dispatch(t.dtype(), [&](auto tag) { return number_of(t.data<decltype(tag)>()[i]); });
}

namespace {
constexpr int64_t kElide = 1000, kEdge = 3;

// NumPy's layout: the innermost axis on one line, each outer axis's items on lines
// of their own (a blank line between blocks of 3-D and more), aligned under the first
// '['; `pad` is the column of the outermost '['.
void text_rec(const Tensor& t, int axis, int64_t offset, const Strides& st, bool elide, size_t pad, std::string& out) {
  const int rank = t.type.rank();
  if (axis == rank) {
    out += number_str(t, offset);
    return;
  }
  std::string sep = ",";
  if (axis == rank - 1) {
    sep += ' ';
  } else {
    sep.append(size_t(rank - axis - 1), '\n');
    sep.append(pad + size_t(axis) + 1, ' ');
  }
  int64_t n = t.shape()[size_t(axis)];
  out += "[";
  for (int64_t i = 0; i < n; ++i) {
    if (elide && n > 2 * kEdge && i == kEdge) {
      out += sep + "...";
      i = n - kEdge;
    }
    if (i > 0) out += sep;
    text_rec(t, axis + 1, offset + i * st[size_t(axis)], st, elide, pad, out);
  }
  out += "]";
}

std::string json_number(const Tensor& t, int64_t i) {
  std::string s = number_str(t, i);
  if (s == "nan") return "NaN";  // as Python's json module writes and reads them
  if (s == "inf") return "Infinity";
  if (s == "-inf") return "-Infinity";
  return s;
}
}  // namespace

std::string tensor_text(const Tensor& t, size_t pad) {
  if (t.size() == 0) return "[]";  // the type says the shape; f32[2^39, 0] must not print 2^39 brackets
  std::string out;
  text_rec(t, 0, 0, row_major_strides(t.shape()), t.size() > kElide, pad, out);
  return out;
}

std::string outputs_text(const RankOutputs& outs) {
  std::string s;
  for (size_t r = 0; r < outs.size(); ++r) {
    s += fmt::format("rank {}:\n", r);
    for (const auto& [name, t] : outs[r]) {
      // a matrix or more starts on a line of its own, its rows aligned below
      if (t.type.rank() >= 2 && t.size() > 0)
        s += fmt::format("  {}: {} =\n    {}\n", name, type_str(t.type), tensor_text(t, 4));
      else
        s += fmt::format("  {}: {} = {}\n", name, type_str(t.type), tensor_text(t));
    }
  }
  return s;
}

std::string outputs_json(const RankOutputs& outs, const Graph& g) {
  // a mesh: its axes beside the world, and each rank's coordinates
  auto axes = [&](auto value) {
    std::vector<std::string> items;
    for (int k = 0; k < num_axes(g); ++k) items.push_back(fmt::format("\"{}\": {}", axis_name(g, k), value(k)));
    return fmt::format("{{{}}}", fmt::join(items, ", "));
  };
  const bool mesh = !g.mesh.axes.empty();
  std::string s = fmt::format("{{\"world\": {},{}\n \"ranks\": [", outs.size(),
                              mesh ? fmt::format(" \"mesh\": {},", axes([&](int k) { return axis_size(g, k); })) : "");
  for (size_t r = 0; r < outs.size(); ++r) {
    const std::string coords =
        mesh ? fmt::format(", \"coords\": {}", axes([&](int k) { return coord(g, int(r), k); })) : "";
    s += fmt::format("{}\n  {{\"rank\": {}{}, \"outputs\": {{", r ? "," : "", r, coords);
    for (size_t k = 0; k < outs[r].size(); ++k) {
      const auto& [name, t] = outs[r][k];
      std::vector<std::string> data;
      for (int64_t i = 0; i < t.size(); ++i) data.push_back(json_number(t, i));
      s += fmt::format("{}\"{}\": {{\"dtype\": \"{}\", \"shape\": [{}], \"data\": [{}]}}", k ? ", " : "", name,
                       dtype_name(t.dtype()), fmt::join(t.shape(), ", "), fmt::join(data, ", "));
    }
    s += "}}";
  }
  return s + "]}\n";
}

}  // namespace gradc
