// gemv.cu: y[t] = W·x[t] in float32 on the CUDA cores, the strict matrix
// product (and the fast one for small T).
//
// A block of 256 threads computes GEMV_ROWS consecutive rows of W for all T
// tokens, TT tokens at a time. Each thread owns a fixed set of pieces of a
// row (16-byte chunks when the rows allow vector loads, single elements
// otherwise): piece p belongs to thread p mod 256. For each token it
// accumulates its pieces in order with fused multiply-adds (FP8 and FP4:
// the chunk's products first, then times the chunk's power-of-two scale);
// the 256 partial sums are added by a fixed butterfly in each warp and then
// warp 0..7 in order. That order depends on K and the format alone, never on
// T, TT or the other tokens: the kernel is batch-invariant.

#define GEMV_THREADS 256
#define GEMV_ROWS 4

template <int FMT, int TT, bool VEC>
__device__ __forceinline__ void gemv_body(float* __restrict__ y, const float* __restrict__ x, const u8* __restrict__ w,
                                          const u8* __restrict__ sc, int rows, int K, int T, int blockRows,
                                          int blockCols, int scaleCols) {
  typedef gemv_fmt<FMT> F;
  __shared__ float red[GEMV_THREADS / 32][GEMV_ROWS * TT];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int r0 = blockIdx.x * GEMV_ROWS;
  long long rr[GEMV_ROWS];
#pragma unroll
  for (int i = 0; i < GEMV_ROWS; ++i) rr[i] = min(r0 + i, rows - 1);
  const long long rowBytes = FMT == FMT_F32 ? 4ll * K : (FMT == FMT_FP8 ? (long long)K : (FMT == FMT_FP4 ? K / 2 : 2ll * K));

  for (int t0 = 0; t0 < T; t0 += TT) {
    float acc[GEMV_ROWS][TT];
    const float* xt[TT];
#pragma unroll
    for (int tt = 0; tt < TT; ++tt) {
      xt[tt] = x + (long long)min(t0 + tt, T - 1) * K;
#pragma unroll
      for (int i = 0; i < GEMV_ROWS; ++i) acc[i][tt] = 0.0f;
    }
    if (VEC) {
      const int nch = (int)(rowBytes / 16);
      for (int c = tid; c < nch; c += GEMV_THREADS) {
        uint4 q[GEMV_ROWS];
#pragma unroll
        for (int i = 0; i < GEMV_ROWS; ++i) q[i] = __ldg((const uint4*)(w + rr[i] * rowBytes) + c);
        float p[GEMV_ROWS][TT];
#pragma unroll
        for (int i = 0; i < GEMV_ROWS; ++i)
#pragma unroll
          for (int tt = 0; tt < TT; ++tt) p[i][tt] = 0.0f;
#pragma unroll
        for (int s = 0; s < F::SUBS; ++s) {
          float wv[GEMV_ROWS][F::SUB];
#pragma unroll
          for (int i = 0; i < GEMV_ROWS; ++i) decode_sub<FMT>(q[i], s, wv[i]);
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
            for (int i = 0; i < GEMV_ROWS; ++i)
#pragma unroll
              for (int j = 0; j < F::SUB; ++j) p[i][tt] = __fmaf_rn(wv[i][j], xv[j], p[i][tt]);
          }
        }
#pragma unroll
        for (int i = 0; i < GEMV_ROWS; ++i) {
          float s = chunk_scale<FMT>(q[i], sc, rr[i], c, K, blockRows, blockCols, scaleCols);
#pragma unroll
          for (int tt = 0; tt < TT; ++tt) acc[i][tt] = __fmaf_rn(p[i][tt], s, acc[i][tt]);
        }
      }
    } else {
      for (int k = tid; k < K; k += GEMV_THREADS) {
        float wv[GEMV_ROWS];
#pragma unroll
        for (int i = 0; i < GEMV_ROWS; ++i) wv[i] = elem<FMT>(w, sc, rr[i], k, K, blockRows, blockCols, scaleCols);
#pragma unroll
        for (int tt = 0; tt < TT; ++tt) {
          float xv = __ldg(xt[tt] + k);
#pragma unroll
          for (int i = 0; i < GEMV_ROWS; ++i) acc[i][tt] = __fmaf_rn(wv[i], xv, acc[i][tt]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < GEMV_ROWS; ++i)
#pragma unroll
      for (int tt = 0; tt < TT; ++tt) {
        float v = warp_sum(acc[i][tt]);
        if (lane == 0) red[warp][i * TT + tt] = v;
      }
    __syncthreads();
    if (tid < GEMV_ROWS * TT) {
      const int i = tid / TT, tt = tid % TT;
      float v = red[0][tid];
#pragma unroll
      for (int j = 1; j < GEMV_THREADS / 32; ++j) v = __fadd_rn(v, red[j][tid]);
      if (r0 + i < rows && t0 + tt < T) y[(long long)(t0 + tt) * rows + r0 + i] = v;
    }
    __syncthreads();
  }
}

// One entry point per format, token group and path: gemv_<fmt>_t<TT>_<v|s>.
#define GEMV_ENTRY(NAME, FMT, TT, VEC)                                                                      \
  extern "C" __global__ void __launch_bounds__(GEMV_THREADS)                                               \
      NAME(float* __restrict__ y, const float* __restrict__ x, const u8* __restrict__ w,                    \
           const u8* __restrict__ sc, int rows, int K, int T, int blockRows, int blockCols, int scaleCols) { PDL_WAIT(); \
    gemv_body<FMT, TT, VEC>(y, x, w, sc, rows, K, T, blockRows, blockCols, scaleCols);                     \
  }
#define GEMV_ENTRIES(F, FMT)                  \
  GEMV_ENTRY(gemv_##F##_t1_v, FMT, 1, true)  \
  GEMV_ENTRY(gemv_##F##_t2_v, FMT, 2, true)  \
  GEMV_ENTRY(gemv_##F##_t4_v, FMT, 4, true)  \
  GEMV_ENTRY(gemv_##F##_t1_s, FMT, 1, false) \
  GEMV_ENTRY(gemv_##F##_t2_s, FMT, 2, false) \
  GEMV_ENTRY(gemv_##F##_t4_s, FMT, 4, false)

GEMV_ENTRIES(f32, FMT_F32)
GEMV_ENTRIES(bf16, FMT_BF16)
GEMV_ENTRIES(f16, FMT_F16)
GEMV_ENTRIES(fp8, FMT_FP8)
GEMV_ENTRIES(fp4, FMT_FP4)
