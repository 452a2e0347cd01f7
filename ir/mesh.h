// The mesh's arithmetic (docs/language.md section 8): axes, coordinates, and the groups a
// collective over some axes runs in. A graph without a mesh has one axis, "world".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace gradc {

std::string mesh_option(const Mesh& m);  // the --mesh option that sets it: "dp=2,tp=2"
int num_axes(const Graph& g);
const std::string& axis_name(const Graph& g, int axis);
int axis_size(const Graph& g, int axis);
int axis_index(const Graph& g, std::string_view name);  // -1 when there is none
std::string axes_list(const Graph& g);                  // "dp, tp": for messages
uint8_t full_mask(const Graph& g);                      // every axis's bit
uint8_t rep_axes(const Graph& g);                       // the axes ranks can differ along: of size > 1
uint8_t axes_mask(const std::vector<int>& axes);
int axes_size(const Graph& g, const std::vector<int>& axes);  // the product of their sizes
int mask_size(const Graph& g, uint8_t mask);                  // the product of their sizes
Attr over_attr(const Graph& g, uint8_t mask);                 // over=[dp, tp]: the axes' names, in declared order
std::string axes_str(const Graph& g, uint8_t mask);           // "dp, tp", in declared order
// The axes' names in their order, joined by `sep` ("dp, tp", "dp_tp").
std::string axes_names(const Graph& g, const std::vector<int>& axes, const char* sep = ", ");

// A node's `over` attribute (axis names, in the order written) as axis indices; every
// axis in declared order when it has none. A name twice or not in the mesh is an
// error at the node.
std::vector<int> over_axes(const Graph& g, const Node& n);
// An input's `shared` attribute: the axes it is the same along (shared: every axis;
// shared(dp): those named; none for a per-rank input).
std::vector<int> shared_axes(const Graph& g, const Node& n);
// Whether an input is `shared` along every axis (one variable everywhere), or along
// the axes it names (shared(dp): one per group).
bool shared_everywhere(const Node& n);
bool shared_in_groups(const Node& n);
// The words of a shared input's check, the interpreter's and the generated code's:
// "<what> differs between ranks A and B at element [i]<note>". `what` is "shared input
// 'w'" (note: "", or " (it is shared along dp)"), or for the torch pullback's cotangent
// of an output that is one loss along some axes (passes/pullback.cpp), the output's
// gradient, with a note naming the axes and the convention.
struct SharedWords {
  std::string what, note;
};
SharedWords shared_words(const Graph& g, const Node& input);

// Whether a collective's groups are not the world in its rank order (over= some axes,
// or every axis in another order).
bool has_groups(const Graph& g, const Node& n);
bool is_world(const Graph& g, const std::vector<int>& axes);  // every axis, in declared order
int group_size(const Graph& g, const Node& n);                // the product of over_axes' sizes

int axis_stride(const Graph& g, int axis);  // ranks between neighbours along it: the later axes' sizes
int coord(const Graph& g, int rank, int axis);
// Rank `rank`'s index in its group over `axes`: row-major over them in that order.
int group_rank(const Graph& g, int rank, const std::vector<int>& axes);
// The groups over `axes`, each its ranks in group-rank order; the groups in order of
// their first rank.
std::vector<std::vector<int>> mesh_groups(const Graph& g, const std::vector<int>& axes);

// A grad over the axes `over` (docs/language.md section 8): one rank of each group of
// ranks that share their coordinates on `over` (the one at 0 on the other axes),
// whose loss stands for the group's.
std::vector<int> loss_representatives(const Graph& g, uint8_t over);
// The groups of ranks that differ only along `axes` (a value replicated along them is
// one variable for each group), each in rank order.
std::vector<std::vector<int>> groups_along(const Graph& g, uint8_t axes);

// "replicated", "varying" (along every axis of size > 1) or "varying(dp)".
std::string rep_str(const Graph& g, Rep r);

}  // namespace gradc
