// What the embedding example expects, computed here with plain loops: rank r
// holds x_r = (r + 1) [[1, 2, 3], [4, 5, 6]], every rank w = [[1, 0], [0, 1], [1, 1]].
#pragma once
#include <cmath>
#include <cstdio>

namespace embed {

inline float x_of(int r, int i, int j) { return float((r + 1) * (3 * i + j + 1)); }
inline float w_of(int i, int j) { return i == 2 || i == j ? 1.0f : 0.0f; }

// y_r = x_r w; s = sum over ranks of sum(y_r^2); dw = d s / d w (mode=mean on the
// replicated s: L = s) = sum over ranks of 2 x_r^T y_r, the same on every rank.
inline bool check(int rank, int world, const float* y, const float* s, const float* dw) {
  auto yv = [&](int r, int i, int j) {
    float acc = 0;
    for (int k = 0; k < 3; ++k) acc += x_of(r, i, k) * w_of(k, j);
    return acc;
  };
  double want_s = 0, want_dw[3][2] = {};
  for (int r = 0; r < world; ++r)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        want_s += double(yv(r, i, j)) * yv(r, i, j);
        for (int k = 0; k < 3; ++k) want_dw[k][j] += 2.0 * x_of(r, i, k) * yv(r, i, j);
      }
  bool ok = std::fabs(s[0] - want_s) <= 1e-5 * want_s;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) ok &= y[2 * i + j] == yv(rank, i, j);
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 2; ++j) ok &= std::fabs(dw[2 * k + j] - want_dw[k][j]) <= 1e-5 * std::fabs(want_dw[k][j]);
  std::printf("rank %d: s = %g (want %g), dw[0] = %g (want %g): %s\n", rank, s[0], want_s, dw[0], want_dw[0][0],
              ok ? "ok" : "WRONG");
  return ok;
}

}  // namespace embed
