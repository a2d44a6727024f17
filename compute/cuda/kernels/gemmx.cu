// gemmx.cu: the Fast product on the tensor cores for more than
// FastGEMVMaxT tokens, y[t] = W·x[t] with x split inside the kernel.
//
// Numerics: the weights (BF16, FP8 e4m3 times its UE8M0 scale, FP4 e2m1
// times its scale) are dequantized exactly to bfloat16; every activation
// is split once, by split_bf16x, as x = hi + lo with hi = bf16(x) and lo =
// bf16(x - hi) (round to nearest even: run 8's operands exactly), and
// mma.sync multiplies W by hi and by lo into one float32 accumulator, 16
// columns at a time. K is cut into S equal parts (S chosen from the
// matrix's shape alone, gemmxSplits in kernels.go); each part sums its
// 32-column tiles in order from zero, and the parts are added in order:
// the same bits whether one block runs all S parts (many tokens) or S
// blocks run one each and gemmx_reduce adds them (few tokens, to fill the
// device). A token's result never depends on T or on the other tokens:
// batch-invariant.
//
// A block of 256 threads (8 warps: 4 along M by 2 along N, each 32 rows
// by 32 tokens) computes 128 rows of W for 64 tokens. The weights and the
// split activations (split_bf16x, once per product) of the next XSTAGES-1
// tiles of 32 columns are in flight (cp.async into dynamic shared memory)
// while this one is multiplied; ldmatrix reads the activations (and BF16
// weights) where they landed, and each thread decodes the FP8/FP4 bytes it
// copied into one of two bfloat16 tiles, so one barrier a tile suffices.

#define XM 128
#define XN 64
#define XK 32
#define XS 40  // bfloat16 stride of the decoded tiles: 32 + 8 against bank conflicts
#define XSTAGES 4

#ifdef STRATA_EMU
template <int B>
__device__ __forceinline__ void cp_async(void* dst, const void* src, bool ok) {
  if (ok) {
    memcpy(dst, src, B);
  } else {
    memset(dst, 0, B);
  }
}
__device__ __forceinline__ void cp_async_commit() {}
__device__ __forceinline__ void cp_async_wait() {}
#else
// cp_async copies B (8 or 16) bytes from global src to shared dst without
// waiting, zeros when !ok (src is then not read).
template <int B>
__device__ __forceinline__ void cp_async(void* dst, const void* src, bool ok) {
  const u32 d = (u32)__cvta_generic_to_shared(dst);
  if (B == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 16 : 0) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d), "l"(src), "n"(B), "r"(ok ? B : 0)
                 : "memory");
  }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// cp_async_wait waits until at most XSTAGES-2 groups of this thread are
// pending: the oldest stage has landed.
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(XSTAGES - 2) : "memory");
}
#endif

// gemmx_w_bytes: a stage's raw weights, 256 chunks of 16 columns (BF16:
// the tile itself, 128 rows at the padded stride, read by ldmatrix).
template <int FMT>
__host__ __device__ constexpr int gemmx_w_bytes() {
  return FMT == FMT_FP8 ? 256 * 16 : (FMT == FMT_FP4 ? 256 * 8 : XM * XS * 2);
}

// gemmx_stage_bytes: one stage of dynamic shared memory: the activations'
// hi and lo tiles (64 tokens at the padded stride), then the raw weights.
template <int FMT>
__host__ __device__ constexpr int gemmx_stage_bytes() {
  return 2 * XN * XS * 2 + gemmx_w_bytes<FMT>();
}

// decode16 turns a thread's raw chunk (16 columns of one row) into 8
// pairs of bfloat16, sb the chunk's UE8M0 scale byte (127 for rows past
// M). FP8 with FAST (the gemmx_fp8 entries): gvx_dec2's bit placement and
// bfloat16x2 multiplies, about 2.5 instructions a weight against the
// software decode's 9 or so (e4m3, a float32 multiply, the bits' shift
// a weight), for scale bytes in [10, 246] and chunks without a NaN code
// (nanFree: the matrix has none): there every product of an e4m3 value
// and the scale is a normal bfloat16, so both decodes give it exactly,
// the same bits. Other chunks take the software decode (run 22's).
template <int FMT, bool FAST>
__device__ __forceinline__ void decode16(u32* o, const u8* raw, u32 sb, int nanFree) {
  if (FMT == FMT_FP8) {
    const uint4 q = *(const uint4*)raw;
    const float s = ue8m0(sb);
    if (FAST && sb >= 10u && sb <= 246u &&
        (nanFree || (e4m3_nan_bits(q.x) | e4m3_nan_bits(q.y) | e4m3_nan_bits(q.z) | e4m3_nan_bits(q.w)) == 0u)) {
      gvx_dec16(q, sb, s, o);
      return;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const u32 v = word_of(q, j);
      o[2 * j] = pack2(bf16_exact(__fmul_rn(e4m3(v & 0xFF), s)), bf16_exact(__fmul_rn(e4m3((v >> 8) & 0xFF), s)));
      o[2 * j + 1] =
          pack2(bf16_exact(__fmul_rn(e4m3((v >> 16) & 0xFF), s)), bf16_exact(__fmul_rn(e4m3(v >> 24), s)));
    }
  } else {  // FMT_FP4
    const uint2 q = *(const uint2*)raw;
    const float s = ue8m0(sb);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const u32 v = j < 4 ? q.x >> (8 * j) : q.y >> (8 * (j - 4));
      o[j] = pack2(bf16_exact(__fmul_rn(e2m1(v), s)), bf16_exact(__fmul_rn(e2m1(v >> 4), s)));
    }
  }
}

// GemmxPairs: the experts' form (gemmx_moe): block y takes tile y of
// moe_sort's list (at most 64 pairs of one expert e, from sorted position
// q0), W is expert e's matrix from tab ([E][data, scale]), pair slot j
// reads the activations of row order[q0 + j] / xDiv and writes row
// order[q0 + j] of y.
struct GemmxPairs {
  const int *order, *idx, *chunks;
  int xDiv;
};

// gemmx_body: block (x, y, z) computes rows [128x, 128x+128) for tokens
// [64y, 64y+64) of group z / (S/per), parts [p·per, p·per+per) with p =
// z % (S/per). xh and xl are the activations split by split_bf16x (bf16,
// hi + lo = x up to lo's rounding), group g's at + g·xgs, rows ldx apart;
// W is w (or group g's matrix from tab, [G][data, scale]). per == S:
// y[t·ldy + g·ygs + r]; per == 1: the part's sums at
// part[((g·S + p)·N + t)·M + r]. With P, the tokens are tile y's pairs
// (GemmxPairs) and G = 1.
template <int FMT, bool FAST>
__device__ __forceinline__ void gemmx_body(float* __restrict__ y, float* __restrict__ part, const u16* __restrict__ xh,
                                           const u16* __restrict__ xl, const u8* __restrict__ w,
                                           const u8* __restrict__ sc, const u64* __restrict__ tab, int M, int K,
                                           int N, int ldx, int xgs, int ldy, int ygs, int blockRows, int blockCols,
                                           int scaleCols, int S, int per, int nanFree, const GemmxPairs* P = 0) {
  DYN_SHARED(u8, smem);
  constexpr int SB = gemmx_stage_bytes<FMT>(), BT = XN * XS;  // BT: bfloat16s of one activation tile
  constexpr bool DEC = FMT != FMT_BF16;                         // the weights need decoding into A
  u16* A = (u16*)(smem + XSTAGES * SB);                         // DEC: two decoded tiles

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int nParts = S / per, g = blockIdx.z / nParts, p = blockIdx.z % nParts;
  int n0 = blockIdx.y * XN, q0 = 0;
  if (P) {
    q0 = P->chunks[2 * blockIdx.y];
    N = P->chunks[2 * blockIdx.y + 1];  // the tile's pairs
    if (N == 0) return;
    n0 = 0;
    const int e = P->idx[P->order[q0]];
    w = (const u8*)tab[2 * e];
    sc = (const u8*)tab[2 * e + 1];
  } else if (tab) {
    w = (const u8*)tab[2 * g];
    sc = (const u8*)tab[2 * g + 1];
  }
  const int m0 = blockIdx.x * XM;
  const int tilesPart = K / XK / S, kt0 = p * per * tilesPart, nt = per * tilesPart;
  const int lr = tid >> 1, lk = (tid & 1) * 16;  // the weight chunk: row, first column
  const int lt = tid >> 2, lc = (tid & 3) * 8;   // the activations: token, first column
  const int row = m0 + lr, tok = n0 + lt;
  const bool rowOK = row < M, tokOK = tok < N;
  const u8* wrow = w + (rowOK ? (long long)row : 0) * (FMT == FMT_FP4 ? K / 2 : (FMT == FMT_BF16 ? 2 * K : K));
  const long long xrow = tokOK ? (P ? P->order[q0 + tok] / P->xDiv : tok) : 0;
  const long long xoff = (long long)g * xgs + xrow * ldx;
  const u16 *xhrow = xh + xoff, *xlrow = xl + xoff;

  // issue queues tile i's copies (or none past the last) as one group.
  auto issue = [&](int i) {
    if (i < nt) {
      const int k = (kt0 + i) * XK;
      u8* st = smem + (i % XSTAGES) * SB;
      u16* bh = (u16*)st;
      cp_async<16>(bh + lt * XS + lc, xhrow + k + lc, tokOK);
      cp_async<16>(bh + BT + lt * XS + lc, xlrow + k + lc, tokOK);
      u8* ws = st + 4 * BT;
      if (FMT == FMT_FP8) {
        cp_async<16>(ws + tid * 16, wrow + k + lk, rowOK);
      } else if (FMT == FMT_FP4) {
        cp_async<8>(ws + tid * 8, wrow + (k + lk) / 2, rowOK);
      } else {
        u16* a = (u16*)ws + lr * XS + lk;
        cp_async<16>(a, wrow + 2 * (k + lk), rowOK);
        cp_async<16>(a + 8, wrow + 2 * (k + lk) + 16, rowOK);
      }
    }
    cp_async_commit();
  };

  float acc[2][4][4], tot[2][4][4];
#pragma unroll
  for (int a = 0; a < 2; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = tot[a][b][c] = 0.0f;

  const int wm = (warp & 3) * 32, wn = (warp >> 2) * 32;
#pragma unroll
  for (int i = 0; i < XSTAGES - 1; ++i) issue(i);
  for (int i = 0; i < nt; ++i) {
    // The chunk's scale byte, loaded before the wait (its latency under
    // the wait's, not after it).
    u32 sb = 127u;
    if (DEC && rowOK) {
      const int k = (kt0 + i) * XK + lk;
      sb = __ldg(sc + (FMT == FMT_FP8 ? (row / blockRows) * scaleCols + k / blockCols : (long long)row * (K / 32) + k / 32));
    }
    cp_async_wait();
    const u8* st = smem + (i % XSTAGES) * SB;
    const u16* a = (const u16*)(st + 4 * BT);
    if (DEC) {
      u32 o[8];
      decode16<FMT, FAST>(o, st + 4 * BT + tid * (FMT == FMT_FP8 ? 16 : 8), sb, nanFree);
      u16* ad = A + (i & 1) * XM * XS;
      store8(&ad[lr * XS + lk], o);
      a = ad;
    }
    // One barrier a tile: after it every thread's copies of tile i and
    // decoded tile i are visible, and every warp is done with tile i-1, so
    // its stage can be refilled (the decoded tiles alternate).
    __syncthreads();
    issue(i + XSTAGES - 1);
    const u16* bh = (const u16*)st;
    const u16* bl = bh + BT;

#pragma unroll
    for (int ks = 0; ks < XK; ks += 16) {
      u32 af[2][4], fh[4][2], fl[4][2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) ldmatrix_x4(af[mt], &a[(wm + mt * 16 + (lane & 15)) * XS + ks + (lane >> 4) * 8]);
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        const int off = (wn + np * 16 + (lane & 7) + ((lane >> 4) << 3)) * XS + ks + ((lane >> 3) & 1) * 8;
        u32 t[4];
        ldmatrix_x4(t, &bh[off]);
        fh[2 * np][0] = t[0]; fh[2 * np][1] = t[1]; fh[2 * np + 1][0] = t[2]; fh[2 * np + 1][1] = t[3];
        ldmatrix_x4(t, &bl[off]);
        fl[2 * np][0] = t[0]; fl[2 * np][1] = t[1]; fl[2 * np + 1][0] = t[2]; fl[2 * np + 1][1] = t[3];
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int n = 0; n < 4; ++n) {
          mma_bf16(acc[mt][n], af[mt], fh[n]);
          mma_bf16(acc[mt][n], af[mt], fl[n]);
        }
    }
    if ((i + 1) % tilesPart == 0) {  // a part ends: add it to the parts before, in order
      const bool first = i + 1 == tilesPart;
#pragma unroll
      for (int a = 0; a < 2; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            tot[a][b][c] = first ? acc[a][b][c] : __fadd_rn(tot[a][b][c], acc[a][b][c]);
            acc[a][b][c] = 0.0f;
          }
    }
  }

  const int gr = lane >> 2, c2 = (lane & 3) * 2;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = m0 + wm + mt * 16 + gr + (e >> 1) * 8;
        const int t = n0 + wn + n * 8 + c2 + (e & 1);
        if (r >= M || t >= N) continue;
        if (P) {
          y[(long long)P->order[q0 + t] * ldy + r] = tot[mt][n][e];
        } else if (per == S) {
          y[(long long)t * ldy + (long long)g * ygs + r] = tot[mt][n][e];
        } else {
          part[(((long long)g * S + p) * N + t) * M + r] = tot[mt][n][e];
        }
      }
}

#define GEMMX_ENTRY(NAME, FMT, MINB, FAST)                                                                           \
  extern "C" __global__ void __launch_bounds__(256, MINB)                                                           \
      NAME(float* __restrict__ y, float* __restrict__ part, const u16* __restrict__ xh, const u16* __restrict__ xl,  \
           const u8* __restrict__ w, const u8* __restrict__ sc, const u64* __restrict__ tab, int M, int K, int N,    \
           int ldx, int xgs, int ldy, int ygs, int blockRows, int blockCols, int scaleCols, int S, int per,          \
           int nanFree) {                                                                                            \
    PDL_WAIT();                                                                                                      \
    gemmx_body<FMT, FAST>(y, part, xh, xl, w, sc, tab, M, K, N, ldx, xgs, ldy, ygs, blockRows, blockCols, scaleCols, \
                          S, per, nanFree);                                                                          \
  }
GEMMX_ENTRY(gemmx_bf16, FMT_BF16, 2, true)
GEMMX_ENTRY(gemmx_fp8, FMT_FP8, 2, true)
GEMMX_ENTRY(gemmx_fp4, FMT_FP4, 2, true)
// _o1: the same kernels bounded for one block an SM (registers unbounded
// by the second block), measured beside.
GEMMX_ENTRY(gemmx_bf16_o1, FMT_BF16, 1, true)
GEMMX_ENTRY(gemmx_fp8_o1, FMT_FP8, 1, true)
GEMMX_ENTRY(gemmx_fp4_o1, FMT_FP4, 1, true)
// gemmx_fp8_r22: run 22's FP8 decode (software, every chunk), for the
// A/B gemmx-dec-r22 and the tests that compare the two decodes' bits.
GEMMX_ENTRY(gemmx_fp8_r22, FMT_FP8, 2, false)

// gemmx_moe_<fmt>: y[q] = W_e·x[q / xDiv] for the pairs q of every tile of
// moe_sort's list (tiles of at most 64 pairs of one expert e), gemmx's
// numerics with K in one part. Grid (ceil(M/128), tiles).
#define GEMMX_MOE_ENTRY(NAME, FMT)                                                                                  \
  extern "C" __global__ void __launch_bounds__(256, 2)                                                             \
      NAME(float* __restrict__ y, const u16* __restrict__ xh, const u16* __restrict__ xl, const int* order,         \
           const int* idx, const int* chunks, const u64* __restrict__ tab, int xDiv, int M, int K, int ldx, int ldy, \
           int blockRows, int blockCols, int scaleCols) {                                                          \
    PDL_WAIT();                                                                                                     \
    const GemmxPairs P = {order, idx, chunks, xDiv};                                                                \
    gemmx_body<FMT, true>(y, 0, xh, xl, 0, 0, tab, M, K, 0, ldx, 0, ldy, 0, blockRows, blockCols, scaleCols, 1, 1, \
                          0, &P);                                                                                    \
  }
GEMMX_MOE_ENTRY(gemmx_moe_bf16, FMT_BF16)
GEMMX_MOE_ENTRY(gemmx_moe_fp8, FMT_FP8)
GEMMX_MOE_ENTRY(gemmx_moe_fp4, FMT_FP4)

// split_bf16x writes x = hi + lo as two bfloat16 arrays, hi = bf16(x) and
// lo = bf16(x - hi) (round to nearest even): gemmx's operands, split once
// for every block that reads them. For n values.
extern "C" __global__ void __launch_bounds__(256) split_bf16x(u16* __restrict__ hi, u16* __restrict__ lo,
                                                              const float* __restrict__ x, int n) {
  PDL_WAIT();
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  const u32 h = bf16_rn(v);
  hi[i] = (u16)h;
  lo[i] = (u16)bf16_rn(__fsub_rn(v, __uint_as_float(h << 16)));
}

// gemmx_reduce adds the S parts of gemmx's per == 1 launches in order:
// y[t·ldy + g·ygs + r] = ((part_0 + part_1) + ...) + part_{S-1}, as one
// block running every part adds them. Grid (ceil(N·M/256), G).
extern "C" __global__ void __launch_bounds__(256) gemmx_reduce(float* __restrict__ y, const float* __restrict__ part,
                                                               int M, int N, int S, int ldy, int ygs) {
  PDL_WAIT();
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x, n = (long long)N * M;
  if (i >= n) return;
  const int g = blockIdx.y;
  const float* p = part + (long long)g * S * n + i;
  float v = p[0];
  for (int s = 1; s < S; ++s) v = __fadd_rn(v, p[(long long)s * n]);
  y[(i / M) * ldy + (long long)g * ygs + i % M] = v;
}
