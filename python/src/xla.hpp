// XLA FFI handlers for JAX (xla.cpp): attention and the grouped matmul on XLA's buffers and
// stream, for the CPU (the interpreter) and CUDA platforms.
#pragma once

#include <nanobind/nanobind.h>

/// {(target name, platform): PyCapsule of the handler} for jax.ffi.register_ffi_target.
nanobind::dict xla_handlers();
