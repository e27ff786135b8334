// tilepipe: Pallas-style software pipelining for Hopper, in C++ (one include for all).
#pragma once

#include "context.cuh"
#include "core/block.cuh"
#include "core/block_spec.cuh"
#include "core/dtypes.cuh"
#include "core/error.cuh"
#include "core/grid.cuh"
#include "core/index_map.cuh"
#include "core/layout.cuh"
#include "core/refs.cuh"
#include "core/register_budget.cuh"
#include "core/static_for.cuh"
#include "kernel.cuh"
#include "profile.cuh"
#include "scoped.cuh"
#include "ops/copy.cuh"
#include "ops/fragment.cuh"
#include "ops/map.cuh"
#include "ops/store.cuh"
#include "ops/turn_order.cuh"
#include "ops/wgmma.cuh"
#include "pipeline/emit_pipeline.cuh"
#include "pipeline/warp_specialized.cuh"
#include "sched/attention_tiles.cuh"
#include "sched/fast_divmod.cuh"
#include "sched/partials.cuh"
#include "sched/stream_k.cuh"
#include "sched/tile_order.cuh"
#include "sched/tile_scheduler.cuh"

/// Short alias: tp::emit_pipeline, tp::spec, ...
namespace tp = tilepipe;
