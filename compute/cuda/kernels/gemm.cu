// gemm.cu: y[t] = W·x[t] for many tokens on the tensor cores: run 8's
// fast product (split_bf16, this kernel on hi and on lo, the two added),
// kept behind Backend.gemmR8 to be measured beside gemmx.cu, which
// replaced it; moe_gemm likewise beside gemmx_moe.
//
// Numerics: the weights are dequantized exactly to bfloat16 (BF16, FP8
// e4m3 times its UE8M0 scale and FP4 e2m1 times its scale are bfloat16
// values; F32 and F16 weights are rounded to nearest even), the activations
// are rounded to bfloat16 (nearest even), and mma.sync multiplies them
// exactly and accumulates in float32. Each output is reduced over K in
// 32-column tiles in order, whatever T: the kernel is batch-invariant.
//
// A block of 256 threads (8 warps, 2 along M by 4 along N) computes a
// 128x128 tile of y^T (128 rows of W by 128 tokens), stepping over K in
// tiles of 32: every thread loads 16 consecutive columns of one row of W
// and of one token, converts them to bfloat16 in registers and stores them
// to shared memory (double-buffered, so that the global loads of the next
// tile overlap the products of this one); each warp multiplies 64x32 with
// m16n8k16 products fed by ldmatrix.

#define GM 128
#define GN 128
#define GK 32
#define GS 40  // shared-memory row stride in bfloat16s: 32 + 8 against bank conflicts

// load_w loads W[row][k .. k+16) as 8 pairs of bfloat16, zero outside the
// matrix. vec: rows allow 16-byte loads (and FP8 blocks are 16-aligned).
template <int FMT>
__device__ __forceinline__ void load_w(u32* o, const u8* __restrict__ w, const u8* __restrict__ sc, int row, int k,
                                       int M, int K, int blockRows, int blockCols, int scaleCols, bool vec) {
  if (row < M && k + 16 <= K && vec) {
    const long long r = row;
    if (FMT == FMT_F32) {
      const float4* p = (const float4*)(w + (r * K + k) * 4);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float4 f = __ldg(p + j);
        o[2 * j] = pack2(bf16_rn(f.x), bf16_rn(f.y));
        o[2 * j + 1] = pack2(bf16_rn(f.z), bf16_rn(f.w));
      }
      return;
    }
    if (FMT == FMT_BF16) {
      const uint4* p = (const uint4*)(w + (r * K + k) * 2);
      uint4 a = __ldg(p), b = __ldg(p + 1);
      o[0] = a.x; o[1] = a.y; o[2] = a.z; o[3] = a.w; o[4] = b.x; o[5] = b.y; o[6] = b.z; o[7] = b.w;
      return;
    }
    if (FMT == FMT_FP8) {
      uint4 q = __ldg((const uint4*)(w + r * K + k));
      float s = ue8m0(__ldg(sc + (r / blockRows) * scaleCols + k / blockCols));
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        u32 v = word_of(q, j);
        o[2 * j] = pack2(bf16_exact(__fmul_rn(e4m3(v & 0xFF), s)), bf16_exact(__fmul_rn(e4m3((v >> 8) & 0xFF), s)));
        o[2 * j + 1] =
            pack2(bf16_exact(__fmul_rn(e4m3((v >> 16) & 0xFF), s)), bf16_exact(__fmul_rn(e4m3(v >> 24), s)));
      }
      return;
    }
    if (FMT == FMT_FP4) {
      uint2 q = __ldg((const uint2*)(w + r * (K / 2) + k / 2));
      float s = ue8m0(__ldg(sc + r * (K / 32) + k / 32));
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        u32 v = j < 4 ? q.x >> (8 * j) : q.y >> (8 * (j - 4));
        o[j] = pack2(bf16_exact(__fmul_rn(e2m1(v), s)), bf16_exact(__fmul_rn(e2m1(v >> 4), s)));
      }
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    u32 h[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int kk = k + 2 * j + e;
      if (row < M && kk < K) {
        float v = elem<FMT>(w, sc, row, kk, K, blockRows, blockCols, scaleCols);
        h[e] = (FMT == FMT_F32 || FMT == FMT_F16) ? bf16_rn(v) : bf16_exact(v);
      } else {
        h[e] = 0;
      }
    }
    o[j] = pack2(h[0], h[1]);
  }
}

// load_x loads x[tok][k .. k+16) rounded to bfloat16 pairs, zero outside.
__device__ __forceinline__ void load_x(u32* o, const float* __restrict__ x, int tok, int k, int N, int K, bool vec) {
  if (tok >= 0 && tok < N && k + 16 <= K && vec) {
    const float4* p = (const float4*)(x + (long long)tok * K + k);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float4 f = __ldg(p + j);
      o[2 * j] = pack2(bf16_rn(f.x), bf16_rn(f.y));
      o[2 * j + 1] = pack2(bf16_rn(f.z), bf16_rn(f.w));
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    u32 h[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int kk = k + 2 * j + e;
      h[e] = (tok >= 0 && tok < N && kk < K) ? bf16_rn(__ldg(x + (long long)tok * K + kk)) : 0u;
    }
    o[j] = pack2(h[0], h[1]);
  }
}

// Grouped (moe_gemm): the block's 128 "tokens" are the pairs of tile
// blockIdx.y of moe_sort's list (at most 128 pairs of one expert e), pair
// q reading row q / xDiv of x; W is expert e's matrix from tab; the
// outputs go to row q of y (added to it when accum). G is null otherwise.
struct GemmGroup {
  const int *order, *idx, *chunks;
  const u64* tab;
  int xDiv, accum;
};

template <int FMT>
__device__ __forceinline__ void gemm_body(float* __restrict__ y, const float* __restrict__ x, const u8* __restrict__ w,
                                          const u8* __restrict__ sc, int M, int K, int N, int blockRows,
                                          int blockCols, int scaleCols, int wvec, int xvec, const GemmGroup* G = 0) {
  __shared__ __align__(16) u16 As[2][GM * GS];
  __shared__ __align__(16) u16 Bs[2][GN * GS];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int m0 = blockIdx.x * GM, n0 = G ? 0 : blockIdx.y * GN;  // grouped: y is the tile
  const int wm = (warp & 1) * 64, wn = (warp >> 1) * 32;
  const int lr = tid >> 1, lk = (tid & 1) * 16;
  int xr = n0 + lr;  // the row of x this thread loads
  int q0 = 0, qn = 0;
  if (G) {
    q0 = G->chunks[2 * blockIdx.y];
    qn = G->chunks[2 * blockIdx.y + 1];
    if (qn == 0) return;
    const int e = G->idx[G->order[q0]];
    w = (const u8*)G->tab[2 * e];
    sc = (const u8*)G->tab[2 * e + 1];
    xr = lr < qn ? G->order[q0 + lr] / G->xDiv : -1;
  }

  float acc[4][4][4];
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;

  u32 ra[8], rb[8];
  const int nk = (K + GK - 1) / GK;
  load_w<FMT>(ra, w, sc, m0 + lr, lk, M, K, blockRows, blockCols, scaleCols, wvec != 0);
  load_x(rb, x, xr, lk, N, K, xvec != 0);
  store8(&As[0][lr * GS + lk], ra);
  store8(&Bs[0][lr * GS + lk], rb);
  __syncthreads();

  for (int kt = 0; kt < nk; ++kt) {
    const int cur = kt & 1;
    if (kt + 1 < nk) {
      load_w<FMT>(ra, w, sc, m0 + lr, (kt + 1) * GK + lk, M, K, blockRows, blockCols, scaleCols, wvec != 0);
      load_x(rb, x, xr, (kt + 1) * GK + lk, N, K, xvec != 0);
    }
#pragma unroll
    for (int ks = 0; ks < GK; ks += 16) {
      u32 af[4][4], bfr[4][2];
#pragma unroll
      for (int mt = 0; mt < 4; ++mt)
        ldmatrix_x4(af[mt], &As[cur][(wm + mt * 16 + (lane & 15)) * GS + ks + (lane >> 4) * 8]);
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        u32 t[4];
        ldmatrix_x4(t, &Bs[cur][(wn + np * 16 + (lane & 7) + ((lane >> 4) << 3)) * GS + ks + ((lane >> 3) & 1) * 8]);
        bfr[2 * np][0] = t[0];
        bfr[2 * np][1] = t[1];
        bfr[2 * np + 1][0] = t[2];
        bfr[2 * np + 1][1] = t[3];
      }
#pragma unroll
      for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) mma_bf16(acc[mt][nt], af[mt], bfr[nt]);
    }
    if (kt + 1 < nk) {
      store8(&As[cur ^ 1][lr * GS + lk], ra);
      store8(&Bs[cur ^ 1][lr * GS + lk], rb);
    }
    __syncthreads();
  }

  const int g = lane >> 2, c2 = (lane & 3) * 2;
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = m0 + wm + mt * 16 + g + (e >> 1) * 8;
        const int tok = n0 + wn + nt * 8 + c2 + (e & 1);
        if (G) {
          if (row < M && tok < qn) {
            float* o = y + (long long)G->order[q0 + tok] * M + row;
            *o = G->accum ? __fadd_rn(*o, acc[mt][nt][e]) : acc[mt][nt][e];
          }
        } else if (row < M && tok < N) {
          y[(long long)tok * M + row] = acc[mt][nt][e];
        }
      }
}

#define GEMM_ENTRY(NAME, FMT)                                                                                  \
  extern "C" __global__ void __launch_bounds__(256)                                                           \
      NAME(float* __restrict__ y, const float* __restrict__ x, const u8* __restrict__ w,                       \
           const u8* __restrict__ sc, int M, int K, int N, int blockRows, int blockCols, int scaleCols, int wvec, \
           int xvec) { PDL_WAIT();                                                                                          \
    gemm_body<FMT>(y, x, w, sc, M, K, N, blockRows, blockCols, scaleCols, wvec, xvec);                         \
  }

// moe_gemm_<fmt>: y[q] (+)= W_e·x[q / xDiv] for the pairs of every tile
// (grid (ceil(M/128), tiles)), the numerics of gemm_<fmt>.
#define MOE_GEMM_ENTRY(NAME, FMT)                                                                               \
  extern "C" __global__ void __launch_bounds__(256)                                                           \
      NAME(float* __restrict__ y, const float* __restrict__ x, int xDiv, const int* order, const int* idx,       \
           const int* chunks, const u64* tab, int accum, int M, int K, int N, int blockRows, int blockCols,     \
           int scaleCols, int wvec, int xvec) { PDL_WAIT();                                                                 \
    const GemmGroup g = {order, idx, chunks, tab, xDiv, accum};                                                 \
    gemm_body<FMT>(y, x, 0, 0, M, K, N, blockRows, blockCols, scaleCols, wvec, xvec, &g);                      \
  }
MOE_GEMM_ENTRY(moe_gemm_f32, FMT_F32)
MOE_GEMM_ENTRY(moe_gemm_bf16, FMT_BF16)
MOE_GEMM_ENTRY(moe_gemm_f16, FMT_F16)
MOE_GEMM_ENTRY(moe_gemm_fp8, FMT_FP8)
MOE_GEMM_ENTRY(moe_gemm_fp4, FMT_FP4)

GEMM_ENTRY(gemm_f32, FMT_F32)
GEMM_ENTRY(gemm_bf16, FMT_BF16)
GEMM_ENTRY(gemm_f16, FMT_F16)
GEMM_ENTRY(gemm_fp8, FMT_FP8)
GEMM_ENTRY(gemm_fp4, FMT_FP4)
