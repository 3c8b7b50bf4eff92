/// @file reduce_kernels.h
/// Element-wise reduction kernels, vectorised with Highway and dispatched at run time to the
/// best instruction set of the CPU (AVX-512, AVX2, SSE4, ..., scalar). float16 and bfloat16
/// are widened to float32 for each step and rounded back to nearest even.
/// Thread-safety: all functions are pure and may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gw_coll_types.h"

namespace gw::coll {

/// dst[i] = a[i] op b[i] for i < count. `dst` may alias `a` or `b` exactly (not partially).
/// For kAvg the step is a sum; when `divisor` > 1 the result is divided by it (the final step
/// of an average). `divisor` is ignored for other ops. Same inputs give the same bytes on
/// every run and every rank (no reassociation across elements).
void reduce(DataType dt, ReduceOp op, void* dst, const void* a, const void* b, size_t count,
            uint32_t divisor = 0);

/// dst[i] = src[i] / divisor (the final step of kAvg where no reduction happens, e.g. one
/// rank). Integers use truncating division.
void divide(DataType dt, void* dst, const void* src, size_t count, uint32_t divisor);

/// Name of the instruction set the kernels dispatch to on this CPU, e.g. "AVX3".
const char* reduce_target_name();

/// float <-> float16/bfloat16 with round-to-nearest-even (NaN stays NaN), scalar.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t h);

}  // namespace gw::coll
