#include "ir/view.h"

namespace gradc {

OpTable<ViewFn>& view_maps() {
  static OpTable<ViewFn> t;
  return t;
}

namespace {
// Operand axis d at output axis d, plus offset[d] (offsets empty: none).
ViewRead aligned(size_t rank, const std::vector<int64_t>& offset) {
  ViewRead r;
  for (size_t d = 0; d < rank; ++d) r.axes.push_back(ViewAxis{int(d), offset.empty() ? 0 : offset[d]});
  return r;
}
}  // namespace

std::vector<ViewAxis> broadcast_axes(const Shape& from, const Shape& to) {
  std::vector<ViewAxis> out;
  const size_t lead = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d) out.push_back(ViewAxis{from[d] == 1 ? -1 : int(d + lead), 0});
  return out;
}

ViewMap reshape_view() { return ViewMap{true, {}}; }

ViewMap broadcast_view(const Shape& from, const Shape& to) {
  ViewRead r;
  r.axes = broadcast_axes(from, to);
  return ViewMap{false, {r}};
}

// output axis d is operand axis perm[d]
ViewMap transpose_view(const std::vector<int64_t>& perm) {
  ViewRead r;
  r.axes.resize(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) r.axes[size_t(perm[d])] = ViewAxis{int(d), 0};
  return ViewMap{false, {r}};
}

ViewMap slice_view(const std::vector<int64_t>& starts) { return ViewMap{false, {aligned(starts.size(), starts)}}; }

// the operand fills [lo, lo + in) of each axis; the rest is 0
ViewMap pad_view(const Shape& in, const std::vector<int64_t>& lo) {
  std::vector<int64_t> back;
  for (int64_t w : lo) back.push_back(-w);
  ViewRead r = aligned(in.size(), back);
  r.lo = lo;
  for (size_t d = 0; d < in.size(); ++d) r.hi.push_back(lo[d] + in[d]);
  return ViewMap{false, {r}};
}

// operand i fills [off, off + len) of the axis, after the operands before it
ViewMap concat_view(const std::vector<Shape>& in, int axis) {
  ViewMap m;
  int64_t off = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    std::vector<int64_t> shift(in[i].size(), 0);
    shift[size_t(axis)] = -off;
    ViewRead r = aligned(in[i].size(), shift);
    r.operand = i;
    r.lo.assign(in[i].size(), 0);
    r.hi = in[i];
    r.lo[size_t(axis)] = off;
    r.hi[size_t(axis)] = off + in[i][size_t(axis)];
    m.reads.push_back(r);
    off += in[i][size_t(axis)];
  }
  return m;
}

}  // namespace gradc
