// slots.cuh: the paged cache's slots (compute.Paged) and the slot formats
// (compute.SlotFormat), encoded and decoded as package quant does, and the
// span table (compute.Spans) the model-level kernels read.
#pragma once

// Slot formats: the values of compute.SlotFormat.
#define SLOT_F32 0
#define SLOT_BF16 1
#define SLOT_FP8KV 2
#define SLOT_FP8KEY 3
#define KV_BLOCK 64
#define E4M3_MAX 448.0f

// Paged is compute.Paged for one layer's kind, passed by value: span s's
// slot k is at byte (k % perPage) * slotBytes of page pages[s * stride + k /
// perPage] of the pool (pageBytes a page).
struct Paged {
  u8* pool;
  const int* pages;
  long long pageBytes;
  int stride, perPage, slotBytes, fmt, width, rope;
};

__device__ __forceinline__ u8* slot_ptr(const Paged& p, int s, int k) {
  const int page = p.pages[s * p.stride + k / p.perPage];
  return p.pool + (long long)page * p.pageBytes + (long long)(k % p.perPage) * p.slotBytes;
}

__device__ __forceinline__ u32 ld_u16(const u8* b) { return (u32)b[0] | ((u32)b[1] << 8); }
__device__ __forceinline__ u32 ld_u32(const u8* b) {
  return (u32)b[0] | ((u32)b[1] << 8) | ((u32)b[2] << 16) | ((u32)b[3] << 24);
}

// slot_value returns value i of a width-wide vector stored in format fmt at
// sl (rope: the trailing channels SLOT_FP8KV keeps in bf16).
__device__ __forceinline__ float slot_value(const u8* sl, int fmt, int width, int rope, int i) {
  switch (fmt) {
    case SLOT_F32:
      return __uint_as_float(ld_u32(sl + 4 * i));
    case SLOT_BF16:
      return bf16_to_f32(ld_u16(sl + 2 * i));
    case SLOT_FP8KV: {
      const int nope = width - rope;
      if (i < nope) return __fmul_rn(e4m3(sl[i]), ue8m0(sl[nope + 2 * rope + i / KV_BLOCK]));
      return bf16_to_f32(ld_u16(sl + nope + 2 * (i - nope)));
    }
    default:  // SLOT_FP8KEY
      return __fmul_rn(e4m3(sl[i]), __uint_as_float(ld_u32(sl + width)));
  }
}

// ue8m0_ceil is quant.Float32ToUE8M0: the byte of the smallest power of two
// >= f.
__device__ __forceinline__ u32 ue8m0_ceil(float f) {
  if (f != f) return 0xFFu;
  if (f <= 0x1p-127f) return 0u;
  if (f > 0x1p127f) return 254u;
  const u32 bits = __float_as_uint(f);
  u32 e = bits >> 23;
  if (e == 0) return 1u;
  if (bits & 0x7FFFFFu) e++;
  return e;
}

// e4m3_rn is quant.Float32ToE4M3: nearest, ties to even, saturating to
// ±448, NaN to 0x7F, the sign kept.
__device__ __forceinline__ u32 e4m3_rn(float f) {
  if (f != f) return 0x7Fu;
  const u32 sign = (__float_as_uint(f) >> 24) & 0x80u;
  const float a = __uint_as_float(__float_as_uint(f) & 0x7FFFFFFFu);
  u32 code;
  if (a < 0x1p-6f) {
    code = (u32)rintf(__fmul_rn(a, 512.0f));  // subnormal steps of 2^-9, exact product
  } else {
    u32 bits = __float_as_uint(a);
    if (bits >= 0x7F800000u) bits = 0x7F7FFFFFu;
    bits += (1u << 19) - 1u + ((bits >> 20) & 1u);
    code = (bits >> 20) - ((127u - 7u) << 3);
  }
  if (code > 0x7Eu) code = 0x7Eu;
  return sign | code;
}

// block_max_abs returns, on every thread, the largest |x[i]| of the block's
// share, reduced over the block (buf: 32 floats of shared memory).
__device__ __forceinline__ float block_reduce_max(float v, float* buf) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  __syncthreads();
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  float m = buf[0];
  for (int j = 1; j < (int)(blockDim.x >> 5); ++j) m = fmaxf(m, buf[j]);
  __syncthreads();
  return m;
}

// encode_row stores the width values x (any memory the block can read) into
// the slot at dst in format fmt, as quant's encoders do. Every thread of the
// block calls it; buf is 32 floats of shared memory.
__device__ __forceinline__ void encode_row(u8* dst, const float* x, int fmt, int width, int rope, float* buf) {
  const int tid = threadIdx.x, nt = blockDim.x;
  switch (fmt) {
    case SLOT_F32:
      for (int i = tid; i < width; i += nt) {
        const u32 b = __float_as_uint(x[i]);
        dst[4 * i] = (u8)b; dst[4 * i + 1] = (u8)(b >> 8); dst[4 * i + 2] = (u8)(b >> 16); dst[4 * i + 3] = (u8)(b >> 24);
      }
      break;
    case SLOT_BF16:
      for (int i = tid; i < width; i += nt) {
        const u32 h = bf16_rn(x[i]);
        dst[2 * i] = (u8)h; dst[2 * i + 1] = (u8)(h >> 8);
      }
      break;
    case SLOT_FP8KV: {
      const int nope = width - rope, nb = (nope + KV_BLOCK - 1) / KV_BLOCK;
      u8* sc = dst + nope + 2 * rope;
      const int padded = (nb + 7) / 8 * 8;
      // One thread a block of channels finds its scale, in channel order.
      for (int b = tid; b < padded; b += nt) {
        if (b >= nb) { sc[b] = 0; continue; }
        float amax = 0.0f;
        for (int c = b * KV_BLOCK; c < min((b + 1) * KV_BLOCK, nope); ++c) amax = fmaxf(amax, fabsf(x[c]));
        sc[b] = (u8)ue8m0_ceil(__fdiv_rn(fmaxf(amax, 1e-30f), E4M3_MAX));
      }
      __syncthreads();
      for (int c = tid; c < nope; c += nt) {
        const float sv = ue8m0(sc[c / KV_BLOCK]);
        dst[c] = (u8)e4m3_rn(fminf(fmaxf(__fdiv_rn(x[c], sv), -E4M3_MAX), E4M3_MAX));
      }
      for (int i = tid; i < rope; i += nt) {
        const u32 h = bf16_rn(x[nope + i]);
        dst[nope + 2 * i] = (u8)h; dst[nope + 2 * i + 1] = (u8)(h >> 8);
      }
      break;
    }
    default: {  // SLOT_FP8KEY
      float amax = 0.0f;
      for (int i = tid; i < width; i += nt) amax = fmaxf(amax, fabsf(x[i]));
      amax = block_reduce_max(amax, buf);
      const float s = __fdiv_rn(fmaxf(amax, 1e-30f), E4M3_MAX);
      for (int i = tid; i < width; i += nt) dst[i] = (u8)e4m3_rn(fminf(fmaxf(__fdiv_rn(x[i], s), -E4M3_MAX), E4M3_MAX));
      if (tid == 0) {
        const u32 b = __float_as_uint(s);
        dst[width] = (u8)b; dst[width + 1] = (u8)(b >> 8); dst[width + 2] = (u8)(b >> 16); dst[width + 3] = (u8)(b >> 24);
      }
    }
  }
  __syncthreads();
}

// Span is one row of compute.Spans.Tab.
struct Span {
  int index, start, n, pos0;
};

// span_of finds the first span holding batch row t of the table (nspans
// rows of start, length, first position); index -1 when none does. The
// rows are read SPAN_U at a time, their loads in flight together: one
// row's loads then its test a row (run 22's loop) made a decode step's
// batch-256 attn_qk spend about 44% of its warps' stall samples in this
// search (ncu, run 23: row t of a decode batch is span t, so a block
// walked t rows, a load's latency each).
#define SPAN_U 16
__device__ __forceinline__ Span span_of(const int* tab, int nspans, int t) {
  for (int s0 = 0; s0 < nspans; s0 += SPAN_U) {
    int st[SPAN_U], n[SPAN_U];
#pragma unroll
    for (int u = 0; u < SPAN_U; ++u) {
      const int s = min(s0 + u, nspans - 1);
      st[u] = tab[3 * s];
      n[u] = tab[3 * s + 1];
    }
#pragma unroll
    for (int u = 0; u < SPAN_U; ++u) {
      const int s = s0 + u;
      if (s < nspans && t >= st[u] && t < st[u] + n[u]) return Span{s, st[u], n[u], tab[3 * s + 2]};
    }
  }
  return Span{-1, 0, 0, 0};
}

// sigmoid_f is the CPU's sigmoid: float64 exponential, rounded to float32.
__device__ __forceinline__ float sigmoid_f(float x) { return (float)(1.0 / (1.0 + exp(-(double)x))); }

// exp_f is float32(exp(float64(x))), the CPU's exponential.
__device__ __forceinline__ float exp_f(float x) { return (float)exp((double)x); }

// gomax is Go's max for float32: NaN if either is NaN.
__device__ __forceinline__ float gomax(float a, float b) {
  if (a != a || b != b) return __uint_as_float(QNAN_BITS);
  return a > b ? a : b;
}

__device__ __forceinline__ float gomin(float a, float b) {
  if (a != a || b != b) return __uint_as_float(QNAN_BITS);
  return a < b ? a : b;
}

// swiglu_f (moe.cu, gemvx.cu) is silu(min(g, L)) · clamp(u, -L, L), as swiglu_act.
__device__ __forceinline__ float swiglu_f(float g, float u, float L) {
  const float gv = gomin(g, L);
  const float uv = gomin(gomax(u, -L), L);
  return __fmul_rn(__fmul_rn(gv, sigmoid_f(gv)), uv);
}

// DYN_SHARED declares name as the block's dynamic shared memory, as T*.
#ifdef STRATA_EMU
#define DYN_SHARED(T, name) T* name = (T*)emu_dyn_shared()
#else
#define DYN_SHARED(T, name)                     \
  extern __shared__ __align__(16) u8 strata_dsm[]; \
  T* name = (T*)strata_dsm
#endif

// bsum returns, on every thread, the sum of v over the block in a fixed
// order (butterfly in each warp, then the warps in order); buf is 32 floats
// of shared memory, reusable after the call.
__device__ __forceinline__ float bsum(float v, float* buf) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  float s = buf[0];
  for (int j = 1; j < (int)(blockDim.x >> 5); ++j) s = __fadd_rn(s, buf[j]);
  __syncthreads();
  return s;
}
