# gradc_cpu_library(TARGET SOURCE): the static library of a program's generated CPU code
# (gradc emit --target=cpu), which both the CMakeLists.txt that gradc emit writes and
# find_package(gradc)'s gradc_add_program() use.
#
# The kernels are compiled as gradc run's native backend compiles them, whatever the
# application's build type and compiler (as add_halide_library builds its pipelines with
# its own tools): -O3 for this machine and its widest vectors, no floating-point contraction (each op rounds as
# gradc's interpreter does), and with clang exp, log, sin and cos vectorised through
# glibc's libmvec. GCC reaches libmvec only with -ffast-math, which would change the
# values, so where the application's compiler is not clang the kernels are compiled by
# clang++ when one is found (GRADC_KERNEL_CXX chooses another).
#
# With MPI, the library links MPI::MPI_CXX and defines GRADC_WITH_MPI for itself and
# its users, which gives the class its constructor on an MPI_Comm (compiled with the
# kernels, as its collectives' host loops are).
function(gradc_cpu_library target source)
  cmake_parse_arguments(G "MPI" "" "" ${ARGN})
  find_package(Threads REQUIRED)
  set(mpi_flags)
  if(G_MPI)
    find_package(MPI REQUIRED COMPONENTS CXX)
    set(mpi_flags -DGRADC_WITH_MPI)
    foreach(d ${MPI_CXX_INCLUDE_DIRS})
      list(APPEND mpi_flags "-I${d}")
    endforeach()
  endif()
  find_path(GRADC_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas REQUIRED)
  find_library(GRADC_OPENBLAS openblas REQUIRED)
  find_program(GRADC_KERNEL_CXX NAMES clang++-19 clang++)
  set(flags -O3 -march=native -mprefer-vector-width=512 -ffp-contract=off -fno-math-errno)
  set(clang_flags -fveclib=libmvec -Wno-invalid-feature-combination)
  get_filename_component(dir "${source}" DIRECTORY)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR NOT GRADC_KERNEL_CXX)
    add_library(${target} STATIC "${source}")
    target_compile_options(${target} PRIVATE ${flags} $<$<CXX_COMPILER_ID:Clang>:${clang_flags}>)
    target_link_libraries(${target} PUBLIC $<$<CXX_COMPILER_ID:Clang>:mvec>)
  else()
    get_filename_component(name "${source}" NAME_WE)
    set(object "${CMAKE_CURRENT_BINARY_DIR}/${target}_kernels.o")
    file(GLOB runtime "${dir}/gradc_*.h")  # the runtime gradc wrote beside the source
    add_custom_command(OUTPUT "${object}"
      COMMAND "${GRADC_KERNEL_CXX}" ${flags} ${clang_flags} ${mpi_flags} -std=c++17 -fPIC "-I${dir}" "-I${GRADC_CBLAS_INCLUDE}"
              -c "${source}" -o "${object}"
      DEPENDS "${source}" "${dir}/${name}.h" ${runtime}
      COMMENT "gradc: compiling ${target}'s kernels with ${GRADC_KERNEL_CXX}")
    add_library(${target} STATIC "${object}")
    set_target_properties(${target} PROPERTIES LINKER_LANGUAGE CXX)
    target_link_libraries(${target} PUBLIC mvec)
  endif()
  target_compile_features(${target} PUBLIC cxx_std_17)
  target_include_directories(${target} PUBLIC "${dir}" "${GRADC_CBLAS_INCLUDE}")
  target_link_libraries(${target} PUBLIC "${GRADC_OPENBLAS}" Threads::Threads)
  if(G_MPI)
    gradc_link_mpi(${target})
  endif()
endfunction()

# gradc_link_mpi(TARGET): a program's library links MPI::MPI_CXX and defines
# GRADC_WITH_MPI for itself and its users (both targets' libraries, with MPI).
function(gradc_link_mpi target)
  find_package(MPI REQUIRED COMPONENTS CXX)
  target_link_libraries(${target} PUBLIC MPI::MPI_CXX)
  target_compile_definitions(${target} PUBLIC GRADC_WITH_MPI)
endfunction()

