// The part of <ATen/ATen.h> that gradc_torch.cpp and PyTorch's process-group headers
// (torch/csrc/distributed/c10d/*.hpp, which include <ATen/ATen.h>) use, for the
// runtime library's compile only: `gradc emit` writes it as csrc/aten/ATen/ATen.h, and
// __init__.py puts csrc/aten first on that compile's include path. Parsing
// every ATen operator's declarations was most of that compile's 15.5 s; with this
// header it takes about 9 s. Where a PyTorch's headers need more (an error in the
// compile), __init__.py compiles the library again with PyTorch's own <ATen/ATen.h>.
#pragma once
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/from_blob.h>
