// The persistent warp-specialised matmul now lives in the library
// (include/tilepipe/kernels/matmul.cuh, CHANGELOG.md); the example, its tests and benchmarks
// keep using it by its old unqualified names.
#pragma once

#include <tilepipe/kernels/matmul.cuh>

#include "../matmul/matmul_kernel.cuh"  // b_layout

using tilepipe::bias_relu_epilogue;
using tilepipe::matmul_ws_kernel;
using tilepipe::no_epilogue;
