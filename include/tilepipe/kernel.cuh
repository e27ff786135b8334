// The host side: devices, tensors, tensor maps and kernel launches.
#pragma once

#include "host/device.cuh"
#include "host/device_group.cuh"
#include "host/launch.cuh"
#include "host/profiler.cuh"
#include "host/tensor.cuh"
#include "host/tensor_map.cuh"
#include "host/timing.cuh"
#include "sched/partials_buffer.cuh"
