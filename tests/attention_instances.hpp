// The attention forward's entry points, compiled once per element type (attention_instances.cu)
// and linked into the four attention test files, the interpreter's debug-checks test and the
// attention example (its CMake pre-includes this header), which would each compile every
// forward and decode kernel again: those kernels are the largest part of the build.
#pragma once

#include <tilepipe/kernels/attention.cuh>

// `extern` here and in the test files; nothing in attention_instances.cu.
// KV is T or tilepipe::fp8_e4m3 (the fp8 cache's overloads).
#define TP_ATTENTION_FORWARD_INSTANCES_KV(EXTERN, T, KV)                                                           \
  EXTERN template void tilepipe::attention_forward<T>(                                                             \
      const tilepipe::device&, const tilepipe::tensor_view<T, 4>&, const tilepipe::tensor_view<KV, 4>&,              \
      const tilepipe::tensor_view<KV, 4>&, const tilepipe::tensor_view<T, 4>&, const tilepipe::attention_options&);  \
  EXTERN template void tilepipe::attention_forward_varlen<T>(                                                      \
      const tilepipe::device&, const tilepipe::tensor_view<T, 3>&, const tilepipe::tensor_view<KV, 4>&,              \
      const tilepipe::tensor_view<KV, 4>&, const tilepipe::tensor_view<T, 3>&, const int*, int, int,                 \
      const tilepipe::attention_options&);                                                                           \
  EXTERN template void tilepipe::attention_forward_varlen<T>(                                                      \
      const tilepipe::device&, const tilepipe::tensor_view<T, 3>&, const tilepipe::tensor_view<KV, 3>&,              \
      const tilepipe::tensor_view<KV, 3>&, const tilepipe::tensor_view<T, 3>&, const int*, const int*, int, int,     \
      const tilepipe::attention_options&);
#define TP_ATTENTION_FORWARD_INSTANCES(EXTERN, T)        \
  TP_ATTENTION_FORWARD_INSTANCES_KV(EXTERN, T, T)        \
  TP_ATTENTION_FORWARD_INSTANCES_KV(EXTERN, T, tilepipe::fp8_e4m3)

#ifndef TP_ATTENTION_INSTANCES_DEFINE
TP_ATTENTION_FORWARD_INSTANCES(extern, tilepipe::bf16)
TP_ATTENTION_FORWARD_INSTANCES(extern, tilepipe::f16)
#endif
