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


// chunk_scale_byte loads the scale byte of chunk c of row r (FP8, FP4; 0
// otherwise), and chunk_scale_from is chunk_scale from it: the same value,
// with the load issued beside the chunk's (PF variants).
template <int FMT>
__device__ __forceinline__ u32 chunk_scale_byte(const u8* __restrict__ sc, long long r, int c, int K, int blockRows,
                                                int blockCols, int scaleCols) {
  if (FMT == FMT_FP8) {
    const int cb = blockCols == 128 ? (c >> 3) : (c * 16) / blockCols;
    return __ldg(sc + (r / blockRows) * scaleCols + cb);
  }
  if (FMT == FMT_FP4) return __ldg(sc + r * (K / 32) + c);
  return 0u;
}

template <int FMT>
__device__ __forceinline__ float chunk_scale_from(const uint4& q, u32 raw) {
  if (FMT == FMT_FP8) {
    const bool nan = (e4m3_nan_bits(q.x) | e4m3_nan_bits(q.y) | e4m3_nan_bits(q.z) | e4m3_nan_bits(q.w)) != 0u;
    return nan ? __uint_as_float(QNAN_BITS) : ue8m0(raw);
  }
  if (FMT == FMT_FP4) return ue8m0(raw);
  return 1.0f;
}

// e4m3x4_hw decodes the four e4m3 bytes of w (low byte first) through the
// hardware conversion (sm_89+: e4m3x2 to f16x2, exact, then f16 to f32,
// exact): the values of e4m3_nonan except for the NaN codes, which decode
// as NaN (the chunk's scale is NaN then anyway). The emulator decodes in
// software.
__device__ __forceinline__ void e4m3x4_hw(u32 w, float* v) {
#ifdef STRATA_EMU
#pragma unroll
  for (int b = 0; b < 4; ++b) v[b] = e4m3(w >> (8 * b));
#else
  u32 lo, hi;
  asm("{\n.reg .b16 a, b;\nmov.b32 {a, b}, %2;\ncvt.rn.f16x2.e4m3x2 %0, a;\ncvt.rn.f16x2.e4m3x2 %1, b;\n}"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
  asm("{\n.reg .b16 a, b;\nmov.b32 {a, b}, %2;\ncvt.f32.f16 %0, a;\ncvt.f32.f16 %1, b;\n}" : "=f"(v[0]), "=f"(v[1]) : "r"(lo));
  asm("{\n.reg .b16 a, b;\nmov.b32 {a, b}, %2;\ncvt.f32.f16 %0, a;\ncvt.f32.f16 %1, b;\n}" : "=f"(v[2]), "=f"(v[3]) : "r"(hi));
#endif
}

// e2m1x8_bf16 decodes the 8 FP4 codes of w (low nibble first) in bf16x2
// arithmetic: codes b and b + 4 placed as the two halves of a bf16x2 word
// (the sign at bit 15, the exponent's low 2 bits and the mantissa's top
// bit at bits 8..6: e2m1 · 2^-126 exactly, subnormal for the codes ±0 and
// ±0.5 as in e2m1 itself), times 2^126 in one bf16x2 multiply (exact:
// each product is an e2m1 value; bf16 arithmetic keeps subnormals), then
// each half widened to float32 by a shift: the values of e2m1, in about
// half its instructions (run 6 measured it on the GPU, the same bits, as
// decode_sub_dec's DEC = 2 in the tiles of 1 pair). The emulator decodes
// with e2m1, and so does a GPU before sm_90 (no bf16x2 multiply).
__device__ __forceinline__ void e2m1x8_bf16(u32 w, float* v) {
#if defined(STRATA_EMU) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900)
#pragma unroll
  for (int b = 0; b < 8; ++b) v[b] = e2m1(w >> (4 * b));
#else
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    const u32 s1 = b < 2 ? (w << (6 - 4 * b)) : (w >> (4 * b - 6));
    const u32 s2 = w << (12 - 4 * b);
    const u32 placed = (s1 & 0x01C001C0u) | (s2 & 0x80008000u);
    u32 r;
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(placed), "r"(0x7E807E80u));
    v[b] = __uint_as_float(r << 16);
    v[b + 4] = __uint_as_float(r & 0xFFFF0000u);
  }
#endif
}

// decode_sub_dec is decode_sub, with DEC = 1 the hardware FP8 decoder and
// DEC = 2 the bf16x2 FP4 decoder (e2m1x8_bf16); the same values.
template <int FMT, int DEC>
__device__ __forceinline__ void decode_sub_dec(const uint4& q, int s, float* v) {
  if (FMT == FMT_FP4 && DEC == 2) {
    e2m1x8_bf16(word_of(q, s), v);
  } else if (FMT == FMT_FP8 && DEC == 1) {
    e4m3x4_hw(word_of(q, 2 * s), v);
    e4m3x4_hw(word_of(q, 2 * s + 1), v + 4);
  } else {
    decode_sub<FMT>(q, s, v);
  }
}

// gemv_rows is gemv2.cu's product (see there) with U chunks of each of R
// rows a warp in flight per lane, the FP8 decoder DEC and, with PF, the
// scale bytes loaded with the chunks: U and R change the work's grouping,
// not any row's order of operations, and DEC and PF not any value: every
// variant gives the same bits.
template <int FMT, int TT, int SPLIT, int U, int R, int DEC, int PF>
__device__ __forceinline__ void gemv_rows(float* __restrict__ y, long long ldy, const float* __restrict__ x,
                                          long long ldx, const u8* __restrict__ w, const u8* __restrict__ sc,
                                           int rows, int K, int T, int blockRows, int blockCols, int scaleCols,
                                           int blk = -1) {
  typedef gemv_fmt<FMT> F;
  const int G = 8 / SPLIT;
  __shared__ float red[8][R * TT];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int grp = warp / SPLIT, part = warp % SPLIT;
  const int r0 = ((blk < 0 ? (int)blockIdx.x : blk) * G + grp) * R;
  long long rr[R];
#pragma unroll
  for (int i = 0; i < R; ++i) rr[i] = min(r0 + i, rows - 1);
  const long long rowBytes =
      FMT == FMT_F32 ? 4ll * K : (FMT == FMT_FP8 ? (long long)K : (FMT == FMT_FP4 ? K / 2 : 2ll * K));
  const int nch = (int)(rowBytes / 16);
  const int stride = 32 * SPLIT;
  // The first step's chunks (weights only) before PDL_WAIT_LATE: in flight
  // while the kernel before this one finishes, under programmatic
  // dependent launch (common.cuh).
  const int cfirst = part * 32 + lane;
  uint4 pre[U][R];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int c = cfirst + u * stride;
#pragma unroll
    for (int i = 0; i < R; ++i) pre[u][i] = c < nch ? __ldg((const uint4*)(w + rr[i] * rowBytes) + c) : make_uint4(0, 0, 0, 0);
  }
  PDL_WAIT_LATE();

  for (int t0 = 0; t0 < T; t0 += TT) {
    float acc[R][TT];
    const float* xt[TT];
#pragma unroll
    for (int tt = 0; tt < TT; ++tt) {
      xt[tt] = x + (long long)min(t0 + tt, T - 1) * ldx;
#pragma unroll
      for (int i = 0; i < R; ++i) acc[i][tt] = 0.0f;
    }
    for (int c0 = cfirst; c0 < nch; c0 += U * stride) {
      uint4 q[U][R];
      u32 sraw[U][R];
      const bool usePre = t0 == 0 && c0 == cfirst;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = c0 + u * stride;
#pragma unroll
        for (int i = 0; i < R; ++i)
          q[u][i] = usePre ? pre[u][i] : (c < nch ? __ldg((const uint4*)(w + rr[i] * rowBytes) + c) : make_uint4(0, 0, 0, 0));
        if (PF)
#pragma unroll
          for (int i = 0; i < R; ++i)
            sraw[u][i] = c < nch ? chunk_scale_byte<FMT>(sc, rr[i], c, K, blockRows, blockCols, scaleCols) : 0u;
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = c0 + u * stride;
        if (c >= nch) break;
        float p[R][TT];
#pragma unroll
        for (int i = 0; i < R; ++i)
#pragma unroll
          for (int tt = 0; tt < TT; ++tt) p[i][tt] = 0.0f;
#pragma unroll
        for (int s = 0; s < F::SUBS; ++s) {
          float wv[R][F::SUB];
#pragma unroll
          for (int i = 0; i < R; ++i) decode_sub_dec<FMT, DEC>(q[u][i], s, wv[i]);
#pragma unroll
          for (int tt = 0; tt < TT; ++tt) {
            float xv[F::SUB];
            const float4* xp = (const float4*)(xt[tt] + c * F::PER + s * F::SUB);
#pragma unroll
            for (int j = 0; j < F::SUB / 4; ++j) {
              float4 f = __ldg(xp + j);
              xv[4 * j] = f.x; xv[4 * j + 1] = f.y; xv[4 * j + 2] = f.z; xv[4 * j + 3] = f.w;
            }
#pragma unroll
            for (int i = 0; i < R; ++i)
#pragma unroll
              for (int j = 0; j < F::SUB; ++j) p[i][tt] = __fmaf_rn(wv[i][j], xv[j], p[i][tt]);
          }
        }
#pragma unroll
        for (int i = 0; i < R; ++i) {
          float s = PF ? chunk_scale_from<FMT>(q[u][i], sraw[u][i])
                       : chunk_scale<FMT>(q[u][i], sc, rr[i], c, K, blockRows, blockCols, scaleCols);
#pragma unroll
          for (int tt = 0; tt < TT; ++tt) acc[i][tt] = __fmaf_rn(p[i][tt], s, acc[i][tt]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int tt = 0; tt < TT; ++tt) acc[i][tt] = warp_sum(acc[i][tt]);
    if (SPLIT == 1) {
      // Every lane holds every sum: lane j stores the j-th.
#pragma unroll
      for (int i = 0; i < R; ++i)
#pragma unroll
        for (int tt = 0; tt < TT; ++tt)
          if (lane == i * TT + tt && r0 + i < rows && t0 + tt < T) y[(long long)(t0 + tt) * ldy + r0 + i] = acc[i][tt];
    } else {
      if (lane == 0) {
#pragma unroll
        for (int i = 0; i < R; ++i)
#pragma unroll
          for (int tt = 0; tt < TT; ++tt) red[warp][i * TT + tt] = acc[i][tt];
      }
      __syncthreads();
      if (part == 0 && lane < R * TT) {
        const int i = lane / TT, tt = lane % TT;
        float v = red[warp][lane];
#pragma unroll
        for (int j = 1; j < SPLIT; ++j) v = __fadd_rn(v, red[warp + j][lane]);
        if (r0 + i < rows && t0 + tt < T) y[(long long)(t0 + tt) * ldy + r0 + i] = v;
      }
      __syncthreads();
    }
  }
}


