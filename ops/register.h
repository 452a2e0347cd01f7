// Every op's rules into every layer's tables: called once, first thing, by each
// program's main (gradc, the unit tests, the fuzzers); no static initialisers.
#pragma once
#include <string>
#include <vector>

namespace gradc {

void register_all();
// The start-up self-check: one line for every op that lacks a rule it needs.
std::vector<std::string> missing_rules();

}  // namespace gradc
