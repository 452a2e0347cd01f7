// Whole files in and out. Errors are UserErrors (no location) naming the path and
// the system's reason.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace gradc {

// Reads a whole file.
std::string read_file(const std::string& path);
// Writes via a temporary name and a rename, so a failed command leaves nothing half-written.
void write_file_atomic(const std::string& path, const std::string& data);
// Writes all the files or none: each is written under a temporary name, and they
// take their names only when all are complete.
void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace gradc
