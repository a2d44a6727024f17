// gemv_common.cuh: the 16-byte chunks the float32 matrix-vector kernels
// (gemv.cu, gemv2.cu) read, decoded exactly.
#pragma once

// Per format: elements per 16-byte chunk.
template <int FMT> struct gemv_fmt;
template <> struct gemv_fmt<FMT_F32> { enum { PER = 4, SUBS = 1, SUB = 4 }; };
template <> struct gemv_fmt<FMT_BF16> { enum { PER = 8, SUBS = 1, SUB = 8 }; };
template <> struct gemv_fmt<FMT_F16> { enum { PER = 8, SUBS = 1, SUB = 8 }; };
template <> struct gemv_fmt<FMT_FP8> { enum { PER = 16, SUBS = 2, SUB = 8 }; };
template <> struct gemv_fmt<FMT_FP4> { enum { PER = 32, SUBS = 4, SUB = 8 }; };

// decode_sub writes elements [s*SUB, (s+1)*SUB) of the 16-byte chunk q,
// unscaled (FP8 and FP4 scales are applied per chunk).
template <int FMT>
__device__ __forceinline__ void decode_sub(const uint4& q, int s, float* v) {
  if (FMT == FMT_F32) {
    v[0] = __uint_as_float(q.x); v[1] = __uint_as_float(q.y);
    v[2] = __uint_as_float(q.z); v[3] = __uint_as_float(q.w);
  } else if (FMT == FMT_BF16 || FMT == FMT_F16) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      u32 w = word_of(q, j);
      v[2 * j] = FMT == FMT_BF16 ? bf16_to_f32(w) : f16_to_f32(w & 0xFFFFu);
      v[2 * j + 1] = FMT == FMT_BF16 ? bf16_to_f32(w >> 16) : f16_to_f32(w >> 16);
    }
  } else if (FMT == FMT_FP8) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      u32 w = word_of(q, 2 * s + j);
#pragma unroll
      for (int b = 0; b < 4; ++b) v[4 * j + b] = e4m3_nonan(w >> (8 * b));
    }
  } else {
    u32 w = word_of(q, s);
#pragma unroll
    for (int b = 0; b < 8; ++b) v[b] = e2m1(w >> (4 * b));
  }
}

// chunk_scale returns the scale of chunk c of row r (1 for unscaled
// formats), NaN when an FP8 chunk holds a NaN code so that the chunk's
// contribution, and the output, is NaN as on the CPU.
template <int FMT>
__device__ __forceinline__ float chunk_scale(const uint4& q, const u8* __restrict__ sc, long long r, int c, int K,
                                             int blockRows, int blockCols, int scaleCols) {
  if (FMT == FMT_FP8) {
    float s = ue8m0(__ldg(sc + (r / blockRows) * scaleCols + (c * 16) / blockCols));
    const bool nan = (e4m3_nan_bits(q.x) | e4m3_nan_bits(q.y) | e4m3_nan_bits(q.z) | e4m3_nan_bits(q.w)) != 0u;
    return nan ? __uint_as_float(QNAN_BITS) : s;
  }
  if (FMT == FMT_FP4) return ue8m0(__ldg(sc + r * (K / 32) + c));
  return 1.0f;
}

