// The .npy reader on arbitrary bytes; what it accepts must write back the same.
#include <cstdlib>

#include "fuzz.h"
#include "runtime/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  return gradc::fuzz::guarded([&] {
    gradc::Tensor t = gradc::parse_npy(bytes, "fuzz.npy");
    gradc::Tensor back = gradc::parse_npy(gradc::npy_bytes(t), "fuzz.npy");
    if (!back.same_values(t)) std::abort();
  });
}
