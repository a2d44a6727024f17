// common.cuh: integer types, reductions and the exact decoders of the
// weight formats of compute.Matrix, shared by every kernel. NVRTC compiles
// these sources with no system headers, so nothing here includes any.
#pragma once

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// Weight formats: the values of compute.DType.
#define FMT_F32 0
#define FMT_BF16 1
#define FMT_F16 2
#define FMT_FP8 3
#define FMT_FP4 4

#define QNAN_BITS 0x7FC00000u

// ue8m0 returns 2^(s-127): 2^-127 (a subnormal) for s = 0, NaN for 255.
__device__ __forceinline__ float ue8m0(u32 s) {
  u32 bits = s == 0 ? 0x00400000u : (s == 255u ? QNAN_BITS : s << 23);
  return __uint_as_float(bits);
}

// e4m3_nonan returns the value of the e4m3fn byte b (low 8 bits), except
// that the NaN codes 0x7F/0xFF decode as 480: the sign and the 7 bits of
// exponent and mantissa are placed under the float32 exponent and scaled
// by 2^120, exact for normals and subnormals alike (the kernels run
// without flush-to-zero).
__device__ __forceinline__ float e4m3_nonan(u32 b) {
  u32 bits = ((b & 0x80u) << 24) | ((b & 0x7Fu) << 20);
  return __fmul_rn(__uint_as_float(bits), 0x1p120f);
}

// e4m3 returns the value of the e4m3fn byte b, NaN for 0x7F and 0xFF.
__device__ __forceinline__ float e4m3(u32 b) {
  return (b & 0x7Fu) == 0x7Fu ? __uint_as_float(QNAN_BITS) : e4m3_nonan(b);
}

// e4m3_nan_bits is nonzero when one of the four bytes of w is a NaN code.
__device__ __forceinline__ u32 e4m3_nan_bits(u32 w) {
  u32 v = (w & 0x7F7F7F7Fu) ^ 0x7F7F7F7Fu;  // a zero byte where the code was 0x7F
  return (v - 0x01010101u) & ~v & 0x80808080u;
}

// e2m1 returns the value of the FP4 code n (low 4 bits): 0, 0.5, 1, 1.5,
// 2, 3, 4, 6 and their negatives, by the same placement as e4m3 (scale 2^126).
__device__ __forceinline__ float e2m1(u32 n) {
  u32 bits = ((n & 7u) << 22) | ((n & 8u) << 28);
  return __fmul_rn(__uint_as_float(bits), 0x1p126f);
}

__device__ __forceinline__ float bf16_to_f32(u32 h) { return __uint_as_float((h & 0xFFFFu) << 16); }

__device__ __forceinline__ float f16_to_f32(u32 h) {
#ifdef STRATA_EMU
  return emu_f16_to_f32((unsigned short)h);
#else
  float f;
  unsigned short s = (unsigned short)h;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(s));
  return f;
#endif
}

// bf16_rn returns the bfloat16 bits nearest to f (ties to even); NaNs stay
// NaN (quiet), as quant.Float32ToBF16.
__device__ __forceinline__ u32 bf16_rn(float f) {
  u32 b = __float_as_uint(f);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (b >> 16) | 0x40u;
  return (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
}

// bf16_exact returns the bfloat16 bits of f, which must be a bfloat16 value
// (the dequantized BF16, FP8 and FP4 weights are).
__device__ __forceinline__ u32 bf16_exact(float f) { return __float_as_uint(f) >> 16; }

// warp_sum returns, on every lane, the sum of v over the warp, in a fixed
// butterfly order.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}

__device__ __forceinline__ double warp_sum_f64(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = __dadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}

// nanmax is max that prefers NaN (as the CPU softmax's running maximum).
__device__ __forceinline__ float nanmax(float a, float b) {
  if (a != a) return a;
  if (b != b || b > a) return b;
  return a;
}

__device__ __forceinline__ u32 word_of(const uint4& q, int j) {
  return j == 0 ? q.x : (j == 1 ? q.y : (j == 2 ? q.z : q.w));
}

// elem returns weight (r, k) of a matrix, dequantized exactly.
template <int FMT>
__device__ __forceinline__ float elem(const u8* __restrict__ w, const u8* __restrict__ sc, long long r, int k,
                                      int K, int blockRows, int blockCols, int scaleCols) {
  if (FMT == FMT_F32) return __ldg((const float*)w + r * K + k);
  if (FMT == FMT_BF16) return bf16_to_f32(__ldg((const unsigned short*)w + r * K + k));
  if (FMT == FMT_F16) return f16_to_f32(__ldg((const unsigned short*)w + r * K + k));
  if (FMT == FMT_FP8) {
    float s = ue8m0(__ldg(sc + (r / blockRows) * scaleCols + k / blockCols));
    return __fmul_rn(e4m3(__ldg(w + r * K + k)), s);
  }
  // FMT_FP4
  u32 b = __ldg(w + r * (K / 2) + k / 2);
  float s = ue8m0(__ldg(sc + r * (K / 32) + k / 32));
  return __fmul_rn(e2m1((k & 1) ? (b >> 4) : b), s);
}

// PDL_WAIT opens every kernel: it lets the next kernel of the stream
// launch (programmatic dependent launch: its blocks start and wait in their
// own PDL_WAIT), then waits until every earlier grid this one depends on
// has completed and its memory is visible. Launched without the
// programmatic-serialization attribute, both are no-ops. Nothing before it
// touches memory, so a launch with the attribute orders exactly as a
// plain one. (The emulator runs launches one after another.)
//
// PDL_OPEN_EARLY opens the kernels that read their weights (immutable
// while kernels run: uploaded before, freed after) before they wait: it
// only lets the next kernel launch; such a kernel calls PDL_WAIT_LATE
// before it touches any other memory (gemv_rows: the first chunks of its
// rows are in flight while the kernel before it finishes).
#ifdef STRATA_EMU
#define PDL_WAIT()
#define PDL_OPEN_EARLY()
#define PDL_WAIT_LATE()
#else
#define PDL_WAIT() asm volatile("griddepcontrol.launch_dependents;\n\tgriddepcontrol.wait;" ::: "memory")
#define PDL_OPEN_EARLY() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#define PDL_WAIT_LATE() asm volatile("griddepcontrol.wait;" ::: "memory")
#endif

// rope_cs returns RoPE's turn of one pair at position p: the cosine and
// sine of the float32 angle p·invFreq, in float64 rounded to float32 (the
// sine negated when inverse), as the CPU computes them.
__device__ __forceinline__ void rope_cs(int p, float invFreq, bool inverse, float* c, float* s) {
  const float ang = __fmul_rn((float)p, invFreq);
  double sd, cd;
  sincos((double)ang, &sd, &cd);
  *c = (float)cd;
  *s = inverse ? -(float)sd : (float)sd;
}

// rope_turn turns the pair (a, b) by (c, s) into *o0, *o1.
__device__ __forceinline__ void rope_turn(float a, float b, float c, float s, float* o0, float* o1) {
  *o0 = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  *o1 = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
}
