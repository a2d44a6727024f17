// gemv2.cu: the float32 matrix-vector product for rows that allow 16-byte
// loads, organized for bandwidth: each warp owns GEMV2_ROWS rows, and
// SPLIT warps of a block share them by interleaved segments of 32 chunks,
// so that every lane keeps GEMV2_UNROLL chunks of each row in flight and
// most products need no shared memory at all.
//
// Lane l of part p of a row group reads chunks c = (j*SPLIT + p)*32 + l,
// j = 0, 1, ..., and accumulates them in that order (each chunk's
// products first, then times its scale, as in gemv.cu); the lanes' sums
// are added by a butterfly, and the SPLIT warps' in part order. The order
// depends on K, the format and SPLIT, which the host chooses from the
// matrix's shape alone: batch-invariant.
//
// The _g entries are the grouped product of compute.Linear's
// GroupedMatMul: block row y takes group g = blockIdx.y, matrix tab[g]
// (data, scale), input columns [g·K, (g+1)·K) of rows ldx apart and output
// columns [g·rows, (g+1)·rows) of rows ldy apart (no copies).

#define GEMV2_ROWS 2
#define GEMV2_UNROLL 4

template <int FMT, int TT, int SPLIT>
__device__ __forceinline__ void gemv2_body(float* __restrict__ y, long long ldy, const float* __restrict__ x,
                                           long long ldx, const u8* __restrict__ w, const u8* __restrict__ sc,
                                           int rows, int K, int T, int blockRows, int blockCols, int scaleCols) {
  typedef gemv_fmt<FMT> F;
  const int R = GEMV2_ROWS, U = GEMV2_UNROLL, G = 8 / SPLIT;
  __shared__ float red[8][GEMV2_ROWS * TT];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int grp = warp / SPLIT, part = warp % SPLIT;
  const int r0 = (blockIdx.x * G + grp) * R;
  long long rr[R];
#pragma unroll
  for (int i = 0; i < R; ++i) rr[i] = min(r0 + i, rows - 1);
  const long long rowBytes =
      FMT == FMT_F32 ? 4ll * K : (FMT == FMT_FP8 ? (long long)K : (FMT == FMT_FP4 ? K / 2 : 2ll * K));
  const int nch = (int)(rowBytes / 16);
  const int stride = 32 * SPLIT;

  for (int t0 = 0; t0 < T; t0 += TT) {
    float acc[R][TT];
    const float* xt[TT];
#pragma unroll
    for (int tt = 0; tt < TT; ++tt) {
      xt[tt] = x + (long long)min(t0 + tt, T - 1) * ldx;
#pragma unroll
      for (int i = 0; i < R; ++i) acc[i][tt] = 0.0f;
    }
    for (int c0 = part * 32 + lane; c0 < nch; c0 += U * stride) {
      uint4 q[U][R];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = c0 + u * stride;
#pragma unroll
        for (int i = 0; i < R; ++i)
          q[u][i] = c < nch ? __ldg((const uint4*)(w + rr[i] * rowBytes) + c) : make_uint4(0, 0, 0, 0);
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
          for (int i = 0; i < R; ++i) decode_sub<FMT>(q[u][i], s, wv[i]);
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
          float s = chunk_scale<FMT>(q[u][i], sc, rr[i], c, K, blockRows, blockCols, scaleCols);
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

#define GEMV2_ENTRY(NAME, FMT, TT, SPLIT)                                                                   \
  extern "C" __global__ void __launch_bounds__(256)                                                        \
      NAME(float* __restrict__ y, const float* __restrict__ x, const u8* __restrict__ w,                    \
           const u8* __restrict__ sc, int rows, int K, int T, int blockRows, int blockCols, int scaleCols) { \
    gemv2_body<FMT, TT, SPLIT>(y, rows, x, K, w, sc, rows, K, T, blockRows, blockCols, scaleCols);         \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(256)                                                        \
      NAME##_g(float* __restrict__ y, int ldy, const float* __restrict__ x, int ldx, const u64* __restrict__ tab, \
               int rows, int K, int T, int blockRows, int blockCols, int scaleCols) {                       \
    const int g = blockIdx.y;                                                                               \
    gemv2_body<FMT, TT, SPLIT>(y + (long long)g * rows, ldy, x + (long long)g * K, ldx, (const u8*)tab[2 * g], \
                               (const u8*)tab[2 * g + 1], rows, K, T, blockRows, blockCols, scaleCols);      \
  }
#define GEMV2_SPLITS(F, FMT, TT)                \
  GEMV2_ENTRY(gemv2_##F##_t##TT##_s1, FMT, TT, 1) \
  GEMV2_ENTRY(gemv2_##F##_t##TT##_s2, FMT, TT, 2) \
  GEMV2_ENTRY(gemv2_##F##_t##TT##_s4, FMT, TT, 4) \
  GEMV2_ENTRY(gemv2_##F##_t##TT##_s8, FMT, TT, 8)
#define GEMV2_ENTRIES(F, FMT) \
  GEMV2_SPLITS(F, FMT, 1)     \
  GEMV2_SPLITS(F, FMT, 2)     \
  GEMV2_SPLITS(F, FMT, 4)

GEMV2_ENTRIES(f32, FMT_F32)
GEMV2_ENTRIES(bf16, FMT_BF16)
GEMV2_ENTRIES(f16, FMT_F16)
GEMV2_ENTRIES(fp8, FMT_FP8)
GEMV2_ENTRIES(fp4, FMT_FP4)
