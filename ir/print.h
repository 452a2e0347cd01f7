// Printing and reading the IR: the textual form (which `gradc opt` reads back
// and which round-trips exactly), Graphviz dot, and JSON.
#pragma once
#include <deque>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace gradc {

// Unique printable names for the values: the name hint where it is free, `hint.N`
// where it is taken, and the node's index where there is no hint. Linear however
// often a hint repeats; a name is made when it is asked for.
class ValueNames {
 public:
  explicit ValueNames(const Graph& g);
  std::string operator[](ValueId v) const;

 private:
  const Graph& g_;
  std::vector<ValueId> renamed_;   // the values whose hint was taken, ascending
  std::deque<std::string> names_;  // their names
};
// Every value's name.
std::vector<std::string> value_names(const Graph& g);

std::string attr_str(const Attr& a);
// A string as a double-quoted literal (quotes and backslashes escaped), as the text and JSON forms write it.
std::string quote(const std::string& s);
// With `loc_file`, each value's line ends with its source location, as MLIR prints
// it: loc("prog.dg":4:7) (the reader keeps it).
std::string print_text(const Graph& g, const std::string& loc_file = "");
std::string print_dot(const Graph& g);
std::string print_json(const Graph& g);

}  // namespace gradc
