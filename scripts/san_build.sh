# Sourced by scripts/sanitize.sh and scripts/fuzz.sh: configures and builds build-san/,
# gradc and its tests and fuzz targets with clang-19, ASan, UBSan and libFuzzer's
# instrumentation (GRADC_FUZZ implies the sanitizers).
CC=clang-19 CXX=clang++-19 cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRADC_FUZZ=ON >/dev/null
cmake --build build-san
