// Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11, as in
// Random123, cuRAND and JAX). Element i of randn/rand(shape, seed=s) depends
// only on (s, i), so every rank and every backend produces the same values.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>

namespace gradc {

inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += W0;
      k[1] += W1;
    }
    uint64_t p0 = uint64_t(M0) * c[0], p1 = uint64_t(M1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1],
         uint32_t(p0)};
  }
  return c;
}

inline std::array<uint32_t, 4> philox_block(int32_t seed, int64_t i) {
  return philox4x32({uint32_t(uint64_t(i)), uint32_t(uint64_t(i) >> 32), 0, 0},
                    {uint32_t(seed), 0x6772646Du /* "grdm" */});
}

// Uniform in [0, 1): the top 24 bits, exact in f32.
inline double uniform01(int32_t seed, int64_t i) {
  return double(philox_block(seed, i)[0] >> 8) * 0x1p-24;
}

// Standard normal by Box-Muller, computed in double and rounded by the caller.
inline double normal01(int32_t seed, int64_t i) {
  auto r = philox_block(seed, i);
  double u1 = double((r[0] >> 8) + 1) * 0x1p-24;  // (0, 1]: log is finite
  double u2 = double(r[1] >> 8) * 0x1p-24;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace gradc
