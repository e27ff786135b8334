// The host side: devices, tensors, tensor maps, kernel launches and the stream-K workspace.
#pragma once

#include "host/device.cuh"
#include "host/device_group.cuh"
#include "host/launch.cuh"
#include "host/profiler.cuh"
#include "host/tensor.cuh"
#include "host/tensor_map.cuh"
#include "host/timing.cuh"
#include "host/partials_buffer.cuh"
