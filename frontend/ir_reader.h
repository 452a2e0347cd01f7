// The IR's textual form, read back (`gradc opt`, the tests): what print_text writes.
#pragma once
#include <string>

#include "ir/graph.h"

namespace gradc {

// Parses the textual form; errors are UserErrors at positions in `text`.
Graph parse_text(const std::string& text);

}  // namespace gradc
