// The buffer plan: where each work buffer of a step lives in one workspace, memory
// reused after a buffer's last use. The compiler plans a program's buffers with it
// (passes/lower_kernels.cpp), and a class generated for any size (gradc emit --size
// B=any) plans them again with it whenever its sizes change: one algorithm for both.
// Self-contained, as it is written beside generated code (as gradc_plan.h).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gradc {

constexpr int64_t kPlanAlign = 256;  // every buffer's place is rounded up to this many bytes

// The plan's steps, in kernel order: b >= 0 places buffer b, -1 - b releases buffer
// b's place. First fit over the free blocks of one workspace: sets offset[b] for each
// buffer placed (bytes[b] its size) and returns the workspace's size.
inline int64_t plan_first_fit(const int32_t* steps, size_t nsteps, const int64_t* bytes, int64_t* offset) {
  struct Block {
    int64_t offset, size;
  };
  std::vector<Block> free_blocks;  // by offset, none adjacent to the next
  int64_t top = 0;
  for (size_t i = 0; i < nsteps; ++i) {
    const int32_t b = steps[i] >= 0 ? steps[i] : -1 - steps[i];
    const int64_t size = (bytes[b] + kPlanAlign - 1) / kPlanAlign * kPlanAlign;
    if (steps[i] >= 0) {
      auto fit = std::find_if(free_blocks.begin(), free_blocks.end(), [&](const Block& f) { return f.size >= size; });
      if (fit != free_blocks.end()) {
        offset[b] = fit->offset;
        fit->offset += size;
        fit->size -= size;
        if (fit->size == 0) free_blocks.erase(fit);
      } else {
        offset[b] = top;
        top += size;
      }
      continue;
    }
    if (size == 0) continue;
    const int64_t off = offset[b];
    auto next = std::lower_bound(free_blocks.begin(), free_blocks.end(), off,
                                 [](const Block& f, int64_t o) { return f.offset < o; });
    const bool joins_prev = next != free_blocks.begin() && std::prev(next)->offset + std::prev(next)->size == off;
    const bool joins_next = next != free_blocks.end() && off + size == next->offset;
    if (joins_prev && joins_next) {
      std::prev(next)->size += size + next->size;
      free_blocks.erase(next);
    } else if (joins_prev) {
      std::prev(next)->size += size;
    } else if (joins_next) {
      next->offset = off;
      next->size += size;
    } else {
      free_blocks.insert(next, {off, size});
    }
  }
  return top;
}

}  // namespace gradc
