#include "runtime/kernels.h"

namespace gradc {

OpTable<KernelRule>& kernels() {
  static OpTable<KernelRule> t;
  return t;
}

}  // namespace gradc
