#include "ir/mesh.h"

#include <fmt/format.h>

#include <algorithm>

namespace gradc {

namespace {
const std::string kWorld = "world";
}

std::string mesh_option(const Mesh& m) {
  std::vector<std::string> axes;
  for (size_t k = 0; k < m.axes.size(); ++k) axes.push_back(fmt::format("{}={}", m.axes[k], m.sizes[k]));
  return fmt::format("{}", fmt::join(axes, ","));
}

int num_axes(const Graph& g) { return g.mesh.axes.empty() ? 1 : int(g.mesh.axes.size()); }
const std::string& axis_name(const Graph& g, int axis) {
  return g.mesh.axes.empty() ? kWorld : g.mesh.axes[size_t(axis)];
}
int axis_size(const Graph& g, int axis) { return g.mesh.axes.empty() ? g.world : g.mesh.sizes[size_t(axis)]; }
int axis_index(const Graph& g, std::string_view name) {
  for (int k = 0; k < num_axes(g); ++k)
    if (axis_name(g, k) == name) return k;
  return -1;
}
std::string axes_list(const Graph& g) { return axes_str(g, full_mask(g)); }
uint8_t full_mask(const Graph& g) { return uint8_t((1u << num_axes(g)) - 1); }
uint8_t rep_axes(const Graph& g) {
  unsigned m = 0;
  for (int k = 0; k < num_axes(g); ++k)
    if (axis_size(g, k) > 1) m |= 1u << k;
  return uint8_t(m);
}
uint8_t axes_mask(const std::vector<int>& axes) {
  unsigned m = 0;
  for (int a : axes) m |= 1u << a;
  return uint8_t(m);
}
int axes_size(const Graph& g, const std::vector<int>& axes) {
  int n = 1;
  for (int a : axes) n *= axis_size(g, a);
  return n;
}
int mask_size(const Graph& g, uint8_t mask) {
  int n = 1;
  for (int k = 0; k < num_axes(g); ++k)
    if (mask & (1u << k)) n *= axis_size(g, k);
  return n;
}
Attr over_attr(const Graph& g, uint8_t mask) {
  Attr a;
  a.kind = Attr::List;
  for (int k = 0; k < num_axes(g); ++k)
    if (mask & (1u << k)) a.list.push_back(Attr::of_sym(axis_name(g, k)));
  return a;
}
std::string axes_names(const Graph& g, const std::vector<int>& axes, const char* sep) {
  std::vector<std::string> names;
  for (int a : axes) names.push_back(axis_name(g, a));
  return fmt::format("{}", fmt::join(names, sep));
}
std::string axes_str(const Graph& g, uint8_t mask) {
  std::vector<std::string> names;
  for (int k = 0; k < num_axes(g); ++k)
    if (mask & (1u << k)) names.push_back(axis_name(g, k));
  return fmt::format("{}", fmt::join(names, ", "));
}

std::vector<int> over_axes(const Graph& g, const Node& n) {
  std::vector<int> out;
  const Attr* a = n.attrs.find("over");
  if (!a) {
    for (int k = 0; k < num_axes(g); ++k) out.push_back(k);
    return out;
  }
  if (a->kind != Attr::List) user_error(n.loc, "{}: over must be a list of axis names", op_name(n.op));
  for (const Attr& e : a->list) {
    const int k = e.kind == Attr::Sym ? axis_index(g, e.s) : -1;
    if (k < 0)
      user_error(n.loc, "{}: over names {}, which is not an axis of the mesh (its axes: {})", op_name(n.op),
                 e.kind == Attr::Sym ? "'" + e.s + "'" : std::string("a value"), axes_list(g));
    for (int seen : out)
      if (seen == k) user_error(n.loc, "{}: over names axis '{}' twice", op_name(n.op), e.s);
    out.push_back(k);
  }
  return out;
}
std::vector<int> shared_axes(const Graph& g, const Node& n) {
  const Attr* a = n.attrs.find("shared");
  if (!a) return {};
  if (a->kind != Attr::List) {
    std::vector<int> all;
    for (int k = 0; k < num_axes(g); ++k) all.push_back(k);
    return all;
  }
  std::vector<int> out;
  for (const Attr& e : a->list) {
    const int k = e.kind == Attr::Sym ? axis_index(g, e.s) : -1;
    if (k < 0) user_error(n.loc, "input: shared names an axis the mesh does not have (its axes: {})", axes_list(g));
    out.push_back(k);
  }
  return out;
}
bool shared_everywhere(const Node& n) { return n.attrs.has("shared") && n.attrs.find("shared")->kind != Attr::List; }
bool shared_in_groups(const Node& n) { return n.attrs.has("shared") && n.attrs.find("shared")->kind == Attr::List; }
SharedWords shared_words(const Graph& g, const Node& n) {
  const uint8_t along = axes_mask(shared_axes(g, n));
  if (const Attr* y = n.attrs.find("cotangent"))
    return {fmt::format("the gradient of output '{}' (its cotangent)", y->s),
            fmt::format(": along {} it is one loss (not --data-parallel), so its gradient must be the same there",
                        axes_str(g, along))};
  return {fmt::format("shared input '{}'", n.attr_sym("name")),
          shared_in_groups(n) ? fmt::format(" (it is shared along {})", axes_str(g, along)) : ""};
}
bool has_groups(const Graph& g, const Node& n) { return n.attrs.has("over") && !is_world(g, over_axes(g, n)); }
bool is_world(const Graph& g, const std::vector<int>& axes) {
  if (axes.size() != size_t(num_axes(g))) return false;
  for (size_t k = 0; k < axes.size(); ++k)
    if (axes[k] != int(k)) return false;
  return true;
}
int group_size(const Graph& g, const Node& n) { return axes_size(g, over_axes(g, n)); }

int axis_stride(const Graph& g, int axis) {
  int stride = 1;
  for (int k = num_axes(g) - 1; k > axis; --k) stride *= axis_size(g, k);
  return stride;
}
int coord(const Graph& g, int rank, int axis) { return rank / axis_stride(g, axis) % axis_size(g, axis); }

int group_rank(const Graph& g, int rank, const std::vector<int>& axes) {
  int r = 0;
  for (int a : axes) r = r * axis_size(g, a) + coord(g, rank, a);
  return r;
}

std::vector<std::vector<int>> mesh_groups(const Graph& g, const std::vector<int>& axes) {
  const uint8_t mask = axes_mask(axes);
  std::vector<std::vector<int>> groups;
  std::vector<int> group_of(size_t(g.world), -1);
  for (int r = 0; r < g.world; ++r) {
    if (group_of[size_t(r)] >= 0) continue;
    // the ranks that agree with r on every other axis
    std::vector<int> members(size_t(axes_size(g, axes)), -1);
    for (int q = r; q < g.world; ++q) {
      bool same = true;
      for (int k = 0; k < num_axes(g) && same; ++k)
        if (!(mask & (1u << k))) same = coord(g, q, k) == coord(g, r, k);
      if (!same) continue;
      members[size_t(group_rank(g, q, axes))] = q;
      group_of[size_t(q)] = int(groups.size());
    }
    groups.push_back(members);
  }
  return groups;
}

std::vector<int> loss_representatives(const Graph& g, uint8_t over) {
  std::vector<int> out;
  for (int r = 0; r < g.world; ++r) {
    bool first = true;
    for (int k = 0; k < num_axes(g) && first; ++k)
      if (!(over & (1u << k))) first = coord(g, r, k) == 0;
    if (first) out.push_back(r);
  }
  return out;
}

std::vector<std::vector<int>> groups_along(const Graph& g, uint8_t axes) {
  std::vector<int> list;
  for (int k = 0; k < num_axes(g); ++k)
    if (axes & (1u << k)) list.push_back(k);
  std::vector<std::vector<int>> groups = mesh_groups(g, list);
  for (auto& group : groups) std::sort(group.begin(), group.end());
  return groups;
}

std::string rep_str(const Graph& g, Rep r) {
  if (!r.known()) return "unknown";
  if (r.axes() == 0) return "replicated";
  if ((r.axes() & rep_axes(g)) == rep_axes(g)) return "varying";
  return fmt::format("varying({})", axes_str(g, r.axes()));
}

}  // namespace gradc
