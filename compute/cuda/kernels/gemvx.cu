// gemvx.cu: the Fast products of FP8 and BF16 weights for 1 to 8 tokens
// on the tensor cores, y[t] = W·x[t], and of the FP4 experts for tiles of
// up to 8 pairs (gemvx_moe_fp4, below); gemvxp_fp8, the FP8 product with
// its loads pipelined, is below gemvx's entries.
//
// The float32 GEMV (gemv2.cu) is bound by its instructions there, not by
// the memory: it decodes and multiplies every weight on the CUDA cores,
// once per token, and run 10's BenchmarkPrefetch read a 32 MB matrix from
// the L2 barely faster than from HBM. Here the tensor cores multiply, and
// the CUDA cores only place the weights' bits.
//
// Numerics (Fast mode, as gemmx): every weight is exact in bfloat16
// (BF16 itself, e4m3 or e2m1 times its UE8M0 scale), every activation is split as x = hi + lo
// with hi = bf16(x) and lo = bf16(x - hi) (round to nearest even), and
// mma.sync m16n8k16 multiplies W by hi and by lo into one float32
// accumulator. The tokens are the mma's 8 columns (token t is column t).
//
// A block of 8 warps computes 32 rows (two tiles of 16; one in the _m1
// entries) for all T ≤ 8 tokens. Warp w takes the 64-column steps w, w+8, w+16, ... of K; lane
// (g, c) = (lane/4, lane%4) loads the 16 bytes [64s + 16c, +16) of rows
// g, g+8, g+16 and g+24 (GVX_U steps in flight) and the same 16 columns
// of x for token g, and feeds them to 4 mmas as their k pairs
// (16c + 4j, +1) and (16c + 4j + 2, +3), j = 0..3: each mma sums a
// permutation of 16 columns, the weights and activations of a column side
// by side. The 8 warps' sums are added in warp order. Every order depends
// on K alone: a token's result does not depend on T or on the other
// tokens (batch-invariant within this kernel; gemmx, above 8 tokens, adds
// in another order).

#define GVX_WARPS 8
#define GVX_U 4
#define GVX_ROWS 32

// gvx_split writes hi and lo of the pair (a, b) (a low) as bfloat16 pairs:
// hi = bf16(x), lo = bf16(x - hi), round to nearest even.
__device__ __forceinline__ void gvx_split(float a, float b, u32& hi, u32& lo) {
#ifdef STRATA_EMU
  const u32 ha = bf16_rn(a), hb = bf16_rn(b);
  hi = pack2(ha, hb);
  lo = pack2(bf16_rn(__fsub_rn(a, __uint_as_float(ha << 16))), bf16_rn(__fsub_rn(b, __uint_as_float(hb << 16))));
#else
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(b), "f"(a));
  const float ra = __fsub_rn(a, __uint_as_float(hi << 16)), rb = __fsub_rn(b, __uint_as_float(hi & 0xFFFF0000u));
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(rb), "f"(ra));
#endif
}

// gvx_step adds to acc one 64-column step of the lane's rows (q[i]: the
// 16 bytes of row i < 2·MT at the lane's 16 columns, e[i] their FP8 scale
// byte) against its token's 16 activations xk (split here as hi + lo):
// gemvx_body's step, shared with gemvxp_body (below), so that both
// give the same bits.
template <int FMT, int MT>
__device__ __forceinline__ void gvx_step(float (&acc)[2][4], const uint4 (&q)[4][FMT == FMT_BF16 ? 2 : 1],
                                         const u32 (&e)[4], const float* xk, int nanFree) {
  u32 xh[8], xl[8];
  const float4* xp = (const float4*)xk;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float4 f = __ldg(xp + j);
    gvx_split(f.x, f.y, xh[2 * j], xl[2 * j]);
    gvx_split(f.z, f.w, xh[2 * j + 1], xl[2 * j + 1]);
  }
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    u32 A[2][8];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = 2 * m + h;
      if (FMT == FMT_BF16) {
#pragma unroll
        for (int j = 0; j < 8; ++j) A[h][j] = word_of(q[i][j / 4], j % 4);
        continue;
      }
      const uint4 v = q[i][0];
      float sf = ue8m0(e[i]);
      if (!nanFree && (e4m3_nan_bits(v.x) | e4m3_nan_bits(v.y) | e4m3_nan_bits(v.z) | e4m3_nan_bits(v.w)) != 0u)
        sf = __uint_as_float(QNAN_BITS);
      gvx_dec16(v, e[i], sf, A[h]);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const u32 a[4] = {A[0][2 * j], A[1][2 * j], A[0][2 * j + 1], A[1][2 * j + 1]};
      const u32 bh[2] = {xh[2 * j], xh[2 * j + 1]}, bl[2] = {xl[2 * j], xl[2 * j + 1]};
      mma_bf16(acc[m], a, bh);
      mma_bf16(acc[m], a, bl);
    }
  }
}

// gvx_finish adds the 8 warps' accumulators in warp order (through red)
// and warp 0 stores rows [r0, r0 + 16·MT) of y for the T tokens:
// gemvx_body's end, shared with gemvxp_body. The block syncs once.
template <int MT>
__device__ __forceinline__ void gvx_finish(float (*red)[8][32], const float (&acc)[2][4], float* y, int ldy, int r0,
                                           int rows, int T) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int e = 0; e < 4; ++e) red[warp][4 * m + e][lane] = acc[m][e];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = red[0][4 * m + e][lane];
      for (int j = 1; j < GVX_WARPS; ++j) v = __fadd_rn(v, red[j][4 * m + e][lane]);
      const int r = r0 + 16 * m + g + (e >> 1) * 8, t = 2 * c + (e & 1);
      if (r < rows && t < T) y[(long long)t * ldy + r] = v;
    }
}

// gemvx_body: block (x, g) computes rows [32x, 32x+32) of group g: matrix
// tab[g] ([G][data, scale]) or w (tab 0), input x + g·xgs (rows ldx
// apart), output y[t·ldy + g·ygs + r]. K is a multiple of 64 (FP8:
// blockCols of 16). nanFree: the FP8 weights hold no NaN code
// (compute.Matrix.NaNFree), so the chunks are not checked for one. BF16
// rows are read as they are: 32 bytes a lane a step, GVX_U/2 steps in
// flight. Grid (ceil(rows/32), G), 256 threads.
template <int FMT, int MT>
__device__ __forceinline__ void gemvx_body(float* __restrict__ y, int ldy, int ygs, const float* __restrict__ x, int ldx,
                                           int xgs, const u8* __restrict__ w, const u8* __restrict__ sc,
                                           const u64* __restrict__ tab, int rows, int K, int T, int blockRows,
                                           int blockCols, int scaleCols, int nanFree) {
  constexpr int U = FMT == FMT_BF16 ? GVX_U / 2 : GVX_U, Q = FMT == FMT_BF16 ? 2 : 1;  // Q: 16-byte loads a row a step
  constexpr int RB = FMT == FMT_BF16 ? 2 : 1;                                           // bytes a weight
  __shared__ float red[GVX_WARPS][8][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  const int grp = blockIdx.y;
  if (tab) {
    w = (const u8*)tab[2 * grp];
    sc = (const u8*)tab[2 * grp + 1];
  }
  y += (long long)grp * ygs;
  x += (long long)grp * xgs;
  const int r0 = blockIdx.x * 16 * MT;
  int rr[4];
#pragma unroll
  for (int i = 0; i < 2 * MT; ++i) rr[i] = min(r0 + g + 8 * i, rows - 1);
  const float* xt = x + (long long)min(g, T - 1) * ldx;
  const int steps = K >> 6;

  float acc[2][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[m][e] = 0.0f;

  for (int s0 = warp; s0 < steps; s0 += GVX_WARPS * U) {
    uint4 q[U][4][Q];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = s0 + u * GVX_WARPS;
#pragma unroll
      for (int i = 0; i < 2 * MT; ++i)
#pragma unroll
        for (int z = 0; z < Q; ++z)
          q[u][i][z] = s < steps ? __ldg((const uint4*)(w + ((long long)rr[i] * K + 64 * s + 16 * c) * RB) + z)
                                 : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = s0 + u * GVX_WARPS;
      if (s >= steps) break;
      const int k = 64 * s + 16 * c;
      u32 e[4] = {0, 0, 0, 0};
      if (FMT == FMT_FP8)
#pragma unroll
        for (int i = 0; i < 2 * MT; ++i) e[i] = __ldg(sc + (rr[i] / blockRows) * scaleCols + k / blockCols);
      gvx_step<FMT, MT>(acc, q[u], e, xt + k, nanFree);
    }
  }

  gvx_finish<MT>(red, acc, y, ldy, r0, rows, T);
}

// The _m1 entries take one tile of 16 rows a block (twice the blocks, for
// matrices of few rows): the same sums in the same order, the same bits.
#define GEMVX_ENTRY(NAME, FMT, MT)                                                                                   \
  extern "C" __global__ void __launch_bounds__(256)                                                                  \
      NAME(float* __restrict__ y, int ldy, int ygs, const float* __restrict__ x, int ldx, int xgs,                    \
           const u8* __restrict__ w, const u8* __restrict__ sc, const u64* __restrict__ tab, int rows, int K, int T,  \
           int blockRows, int blockCols, int scaleCols, int nanFree) {                                               \
    PDL_WAIT();                                                                                                      \
    gemvx_body<FMT, MT>(y, ldy, ygs, x, ldx, xgs, w, sc, tab, rows, K, T, blockRows, blockCols, scaleCols, nanFree); \
  }
GEMVX_ENTRY(gemvx_fp8, FMT_FP8, 2)
GEMVX_ENTRY(gemvx_bf16, FMT_BF16, 2)
GEMVX_ENTRY(gemvx_fp8_m1, FMT_FP8, 1)
GEMVX_ENTRY(gemvx_bf16_m1, FMT_BF16, 1)

// ---- gemvxp: gemvx's FP8 product with its weight loads in a ring ----
//
// gemvxp_body is gemvx's FP8 product of 1 to 8 tokens with its weight
// loads in a shared-memory ring (ring.cuh) and persistent blocks,
// as gemvp.cu does for gemv2: the same bits as gemvx. Off until measured
// (Kernels.gemvxP).
//
// Why: gemvx loads GVX_U steps of its rows, waits, then decodes and
// multiplies them, and run 10 timed it flat from 1 to 8 tokens (FP8
// 4096x8192: 19.6 us at T = 1, 21.1 at T = 8: 1.5-1.7 TB/s): bound by
// the loads' phases, not by the tensor cores. Here each thread copies
// its own 16-byte chunks S - 1 steps ahead of the step it computes, and
// a block computes gemvx's blocks b, b + grid, ... (32 rows each) with
// its ring running across them.
//
// Order: warp w takes the steps w, w + 8, ... of each unit, in order, and
// computes each with gvx_step (gemvx_body's step); the 8 warps' sums are
// added in warp order at the unit's end. Every order is gemvx's.
// Grid: at most units (ceil(rows/32)) times groups, 256 threads, dynamic
// shared memory S · 4 rows · 256 · 16 bytes (64 KB at S = 4).

template <int MT, int S>
__device__ __forceinline__ void gemvxp_body(float* __restrict__ y0, int ldy, int ygs, const float* __restrict__ x0,
                                            int ldx, int xgs, const u8* __restrict__ w0, const u8* __restrict__ s0,
                                            const u64* __restrict__ tab, int units, int groups, int rows, int K, int T,
                                            int rs, int cs, int scaleCols, int nanFree) {
  const int NT = 256, NR = 2 * MT;
  DYN_SHARED(uint4, ring);  // [S][NR][NT]
  __shared__ float red[GVX_WARPS][8][32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  const int steps = K >> 6;
  const int nsw = warp < steps ? (steps - 1 - warp) / GVX_WARPS + 1 : 0;  // this warp's steps a unit
  const int total = units * groups;
  const int mine = (int)blockIdx.x < total ? (total - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
  auto slot = [&](int st, int i) -> uint4* { return ring + ((st * NR + i) * NT + tid); };

  // The issue cursor: unit ii of the block (gemvx's block ib of group ig),
  // step ij of the warp's in it.
  int ii = 0, ij = 0, ib = blockIdx.x, ig = 0;
  while (ib >= units) ib -= units, ++ig;
  const int b0 = ib, g0 = ig;
  auto issue = [&](int st) {
    if (ii < mine && nsw > 0) {
      const u8* w = tab ? (const u8*)tab[2 * ig] : w0;
      const int r0 = ib * 16 * MT, s = warp + GVX_WARPS * ij;
#pragma unroll
      for (int i = 0; i < NR; ++i)
        ring_copy16(slot(st, i), w + (long long)min(r0 + g + 8 * i, rows - 1) * K + 64 * s + 16 * c);
      if (++ij == nsw) {
        ij = 0, ++ii, ib += gridDim.x;
        while (ib >= units) ib -= units, ++ig;
      }
    }
    ring_commit();
  };
  // The first stages copy weights only: before PDL_WAIT_LATE, in flight
  // while the kernel before this one finishes (common.cuh).
#pragma unroll
  for (int st = 0; st < S - 1; ++st) issue(st);
  PDL_WAIT_LATE();

  int st = 0;
  for (int i = 0, cb = b0, cg = g0; i < mine; ++i) {
    const u8* sc = tab ? (const u8*)tab[2 * cg + 1] : s0;
    const int r0 = cb * 16 * MT;
    int rr[4];
#pragma unroll
    for (int r = 0; r < NR; ++r) rr[r] = min(r0 + g + 8 * r, rows - 1);
    const float* xt = x0 + (long long)cg * xgs + (long long)min(g, T - 1) * ldx;
    float acc[2][4];
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[m][e] = 0.0f;
    for (int j = 0; j < nsw; ++j) {
      // Step j's copies have landed; the stage issued now was last read
      // at the step before, by this thread.
      ring_wait<S - 2>();
      issue(st == 0 ? S - 1 : st - 1);
      const int k = 64 * (warp + GVX_WARPS * j) + 16 * c;
      u32 e[4] = {0, 0, 0, 0};
#pragma unroll
      for (int r = 0; r < NR; ++r) e[r] = __ldg(sc + (long long)(rr[r] >> rs) * scaleCols + ((k >> 4) >> cs));
      uint4 q[4][1];
#pragma unroll
      for (int r = 0; r < NR; ++r) q[r][0] = *slot(st, r);
      gvx_step<FMT_FP8, MT>(acc, q, e, xt + k, nanFree);
      st = st == S - 1 ? 0 : st + 1;
    }
    gvx_finish<MT>(red, acc, y0 + (long long)cg * ygs, ldy, r0, rows, T);
    __syncthreads();  // red is written again at the next unit
    cb += gridDim.x;
    while (cb >= units) cb -= units, ++cg;
  }
}

// gemvxp_fp8: y[t·ldy + g·ygs + r] = W_g·x[t·ldx + g·xgs + ...] for T ≤ 8
// tokens, W_g = tab[g] (or w, sc when tab is 0), units = ceil(rows/32);
// rs and cs are log2 of the scale block's rows and of its columns in
// 16-column chunks.
extern "C" __global__ void __launch_bounds__(256, 2)
    gemvxp_fp8(float* __restrict__ y, int ldy, int ygs, const float* __restrict__ x, int ldx, int xgs,
               const u8* __restrict__ w, const u8* __restrict__ sc, const u64* __restrict__ tab, int units, int groups,
               int rows, int K, int T, int rs, int cs, int scaleCols, int nanFree) {
  PDL_OPEN_EARLY();
  gemvxp_body<2, 4>(y, ldy, ygs, x, ldx, xgs, w, sc, tab, units, groups, rows, K, T, rs, cs, scaleCols, nanFree);
}

// ---- the routed experts: tiles of up to 8 pairs of one expert ----
//
// gemvx_moe_fp4 is gemvx for moe_sort's tiles (Fast mode, FP4 experts):
// block (x, y) computes rows [16x, 16x+16) of tile y's expert for the
// tile's pairs (at most 8: the mma's columns; pair j of the tile is
// order[q0 + j], its activations row order[q0 + j] / xDiv of x). With
// tab3 (gate and up): W1 from tab1 and W3 from tab3 on the same rows, and
// y[pair][r] = silu(min(W1·x, L))·clamp(W3·x, ±L) (swiglu_f); else
// y[pair][r] = W·x (W from tab1). K is a multiple of 128.
//
// A step is 128 columns: lane (g, c) loads the 16 bytes (32 codes) at
// column 128s + 32c of rows g and g+8, in two halves of 16 columns; each
// half's two words of 8 codes decode as bfloat16 pairs (codes b and b+4 of
// a word: the sign, exponent and mantissa bits placed as e2m1 times
// 2^-126, then one multiply by 2^126 times the row's scale of these 32
// columns), and x is split in the same pairs, so the mmas sum the columns
// of each half in a fixed permutation. Warps take steps w, w+8, ... and
// are added in warp order: every order depends on K alone.

// gvx_fp4_pair decodes codes b and b+4 of w (b < 4) as a bfloat16 pair
// times m2 (2^126 times the scale as a bfloat16 pair; sf the scale, for
// the emulator).
__device__ __forceinline__ u32 gvx_fp4_pair(u32 w, int b, u32 m2, u32 s2, bool two, float sf) {
#if defined(STRATA_EMU) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900)
  (void)m2;
  (void)s2;
  (void)two;
  return pack2(bf16_exact(__fmul_rn(e2m1(w >> (4 * b)), sf)), bf16_exact(__fmul_rn(e2m1(w >> (4 * b + 16)), sf)));
#else
  (void)sf;
  const u32 s1 = b < 2 ? (w << (6 - 4 * b)) : (w >> (4 * b - 6));
  const u32 sg = w << (12 - 4 * b);
  u32 t = (s1 & 0x01C001C0u) | (sg & 0x80008000u);
  asm("mul.rn.bf16x2 %0, %0, %1;" : "+r"(t) : "r"(m2));
  if (two) asm("mul.rn.bf16x2 %0, %0, %1;" : "+r"(t) : "r"(s2));
  return t;
#endif
}

// gvx_moe_step adds one 128-column step of NA row tiles of 16 rows to
// acc: q[n][h] are the lane's 16 bytes of tile n's row g + 8h at columns
// [k, k + 32) (k = 128s + 32c), eb[n][h] that row's scale byte of them,
// xt the lane's token's activations. gemvx_moe_body's step, shared with
// gvxr_body (below), so that both give the same bits.
template <int NA>
__device__ __forceinline__ void gvx_moe_step(float (&acc)[NA][4], const uint4 (&q)[NA][2], const u32 (&eb)[NA][2],
                                             const float* __restrict__ xt, int k) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    // x in the decoder's pairs: (x[i], x[i+4]) for i = 0..3, 8..11.
    u32 xh[8], xl[8];
    const float4* xp = (const float4*)(xt + k + 16 * half);
    float xv[16];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float4 f = __ldg(xp + j);
      xv[4 * j] = f.x; xv[4 * j + 1] = f.y; xv[4 * j + 2] = f.z; xv[4 * j + 3] = f.w;
    }
#pragma unroll
    for (int v = 0; v < 8; ++v) {
      const int i = v < 4 ? v : v + 4;
      gvx_split(xv[i], xv[i + 4], xh[v], xl[v]);
    }
#pragma unroll
    for (int n = 0; n < NA; ++n) {
      u32 A[2][8];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float sf = ue8m0(eb[n][h]);
        const u32 sb = __float_as_uint(sf) >> 16, s2 = sb | (sb << 16);
        const bool two = eb[n][h] > 128u;  // 2^126·scale is no bfloat16 (or the scale is NaN)
        const u32 mb = two ? 0x7E80u : (eb[n][h] + 126u) << 7, m2 = mb | (mb << 16);
        const uint4 v = q[n][h];
        const u32 w0 = half ? v.z : v.x, w1 = half ? v.w : v.y;
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          A[h][b] = gvx_fp4_pair(w0, b, m2, s2, two, sf);
          A[h][4 + b] = gvx_fp4_pair(w1, b, m2, s2, two, sf);
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const u32 a[4] = {A[0][2 * j], A[1][2 * j], A[0][2 * j + 1], A[1][2 * j + 1]};
        const u32 bh[2] = {xh[2 * j], xh[2 * j + 1]}, bl[2] = {xl[2 * j], xl[2 * j + 1]};
        mma_bf16(acc[n], a, bh);
        mma_bf16(acc[n], a, bl);
      }
    }
  }
}

template <int NM, int U>
__device__ __forceinline__ void gemvx_moe_body(float* __restrict__ y, const float* __restrict__ x, int xDiv,
                                               const int* __restrict__ order, const int* __restrict__ idx,
                                               const int* __restrict__ chunks, const u64* __restrict__ tab1,
                                               const u64* __restrict__ tab3, int rows, int K, float L) {
  __shared__ float red[GVX_WARPS][4 * NM][32];
  __shared__ int sq[8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  const int q0 = chunks[2 * blockIdx.y], qn = chunks[2 * blockIdx.y + 1];
  if (qn == 0) return;
  if (threadIdx.x < 8) sq[threadIdx.x] = order[q0 + min((int)threadIdx.x, qn - 1)];
  __syncthreads();
  const int e = idx[sq[0]];
  const u8* wm[NM];
  const u8* sm[NM];
#pragma unroll
  for (int n = 0; n < NM; ++n) {
    const u64* tab = n == 0 ? tab1 : tab3;
    wm[n] = (const u8*)tab[2 * e];
    sm[n] = (const u8*)tab[2 * e + 1];
  }
  const int r0 = blockIdx.x * 16;
  const int rr[2] = {min(r0 + g, rows - 1), min(r0 + g + 8, rows - 1)};
  const float* xt = x + (long long)(sq[min(g, qn - 1)] / xDiv) * K;
  const int steps = K >> 7, rowBytes = K >> 1, scaleCols = K >> 5;

  float acc[NM][4];
#pragma unroll
  for (int n = 0; n < NM; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[n][i] = 0.0f;

  for (int s0 = warp; s0 < steps; s0 += GVX_WARPS * U) {
    uint4 q[U][NM][2];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = s0 + u * GVX_WARPS;
#pragma unroll
      for (int n = 0; n < NM; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          q[u][n][h] = s < steps ? __ldg((const uint4*)(wm[n] + (long long)rr[h] * rowBytes + 64 * s + 16 * c))
                                 : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = s0 + u * GVX_WARPS;
      if (s >= steps) break;
      const int k = 128 * s + 32 * c;
      u32 eb[NM][2];
#pragma unroll
      for (int n = 0; n < NM; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h) eb[n][h] = __ldg(sm[n] + (long long)rr[h] * scaleCols + (k >> 5));
      gvx_moe_step<NM>(acc, q[u], eb, xt, k);
    }
  }

#pragma unroll
  for (int n = 0; n < NM; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) red[warp][4 * n + i][lane] = acc[n][i];
  __syncthreads();
  if (warp != 0) return;
  float v[NM][4];
#pragma unroll
  for (int n = 0; n < NM; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float s = red[0][4 * n + i][lane];
      for (int j = 1; j < GVX_WARPS; ++j) s = __fadd_rn(s, red[j][4 * n + i][lane]);
      v[n][i] = s;
    }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = r0 + g + (i >> 1) * 8, t = 2 * c + (i & 1);
    if (r >= rows || t >= qn) continue;
    y[(long long)sq[t] * rows + r] = NM == 2 ? swiglu_f(v[0][i], v[NM - 1][i], L) : v[0][i];
  }
}

// U: steps of 128 columns each lane keeps in flight (2; the _u4 entry 4,
// measured beside: the same sums in the same order, the same bits).
#define GEMVX_MOE_ENTRY(NAME, U)                                                                                  \
  extern "C" __global__ void __launch_bounds__(256)                                                               \
      NAME(float* __restrict__ y, const float* __restrict__ x, int xDiv, const int* __restrict__ order,            \
           const int* __restrict__ idx, const int* __restrict__ chunks, const u64* __restrict__ tab1,               \
           const u64* __restrict__ tab3, int rows, int K, float L) {                                               \
    PDL_WAIT();                                                                                                   \
    if (tab3)                                                                                                     \
      gemvx_moe_body<2, U>(y, x, xDiv, order, idx, chunks, tab1, tab3, rows, K, L);                               \
    else                                                                                                          \
      gemvx_moe_body<1, U>(y, x, xDiv, order, idx, chunks, tab1, tab3, rows, K, L);                               \
  }
GEMVX_MOE_ENTRY(gemvx_moe_fp4, 2)
GEMVX_MOE_ENTRY(gemvx_moe_fp4_u4, 4)

// ---- gvxr: gemvx_moe_fp4 with its loads in a ring, persistent ----
//
// Why: gemvx_moe_fp4's blocks live for two rounds of "load two steps,
// wait, compute them" (16 rows of K = 4096: 4 steps a warp), so its
// loads are in flight only part of the time: run 10 read the experts at
// 1.2-1.3 TB/s with it, as the float32 _sx kernels do at batch 1 and 8,
// which are bound by their instructions instead (about 6.7 a weight).
//
// gemvx_moe_fp4_ring computes gemvx_moe_fp4's outputs with its step
// (gvx_moe_step) in its order, so with its bits:
//   - persistent blocks (2 an SM); the launch's items are (tile, block of
//     16·MT rows), tile-major, ntiles·rb of them (ntiles: the non-empty
//     tiles, which moe_sort writes after its list); block b takes the
//     contiguous items [b·N/G, (b+1)·N/G), so it changes tile (expert,
//     activations) rarely;
//   - a thread's tasks are (item, j): step s = warp + 8j of the item's
//     rows (J = ceil(steps/8) a warp, the same for every warp; a step past
//     K is an empty task), and the thread copies each task's 16-byte
//     chunks of its rows, with the 4-byte words of their scale bytes, into
//     its own slots of a ring of S stages (cp.async, as gemvp), S - 1
//     tasks ahead, across items;
//   - an item's 8 warps' sums are added in warp order, as gemvx_moe_fp4
//     adds them, by warps 0-3 (one sum of each of the 4 fragment values a
//     warp), through red[item parity]: one barrier an item.
// NA = NM·MT row tiles of 16 an item: gate/up (NM = 2, MT = 1: W1's and
// W3's rows r..r+15, SwiGLU fused) or down (NM = 1, MT = 2: W2's rows
// r..r+31). Dynamic shared memory: S·(2·NA + 1)·256·16 bytes of rings,
// then 16 KB of red (gvxrShared in moeops.go).

#define GVXR_NT 256

// gvxr_tile is a tile of moe_sort's list as a thread uses it: its pairs
// (first sorted position, count) and its expert's matrices and scales.
template <int NM>
struct gvxr_tile {
  int y, q0, qn;
  const u8* wm[NM];
  const u8* sm[NM];
};

template <int NM>
__device__ __forceinline__ void gvxr_load(gvxr_tile<NM>& t, int y, const int* __restrict__ order,
                                          const int* __restrict__ idx, const int* __restrict__ chunks,
                                          const u64* __restrict__ tab1, const u64* __restrict__ tab3) {
  t.y = y;
  t.q0 = chunks[2 * y];
  t.qn = chunks[2 * y + 1];
  const int e = idx[order[t.q0]];
#pragma unroll
  for (int n = 0; n < NM; ++n) {
    const u64* tab = n == 0 ? tab1 : tab3;
    t.wm[n] = (const u8*)tab[2 * e];
    t.sm[n] = (const u8*)tab[2 * e + 1];
  }
}

// gvxr_item_end ends an item of gvxr_body and gvxh_body: the 8 warps'
// fragments through red (one barrier), then warp i < 4 adds fragment i
// of every lane in warp order (gemvx_moe_fp4's order), times the pair's
// factor cs0 or cs1 when SCALED (gvxh_body's rows), and stores rows r0 +
// g + 8(i/2) (+ 16a) of pair 2c + i%2 < qn (sq0, sq1: their pair ids),
// SwiGLU'd when NM is 2; acc restarts at zero.
template <int NM, int MT, bool SCALED>
__device__ __forceinline__ void gvxr_item_end(float (*red)[4 * NM * MT][32], float (&acc)[NM * MT][4],
                                              float* __restrict__ y, int rows, int r0, int qn, int sq0, int sq1,
                                              float cs0, float cs1, float L) {
  enum { NA = NM * MT };
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int a = 0; a < NA; ++a)
#pragma unroll
    for (int i = 0; i < 4; ++i) red[warp][4 * a + i][lane] = acc[a][i], acc[a][i] = 0.0f;
  __syncthreads();
  if (warp >= 4) return;
  const int i = warp;
  const float cs = (i & 1) ? cs1 : cs0;
  float v[NA];
#pragma unroll
  for (int a = 0; a < NA; ++a) {
    float sum = red[0][4 * a + i][lane];
    for (int w = 1; w < GVX_WARPS; ++w) sum = __fadd_rn(sum, red[w][4 * a + i][lane]);
    v[a] = SCALED ? __fmul_rn(sum, cs) : sum;
  }
  const int t = 2 * c + (i & 1), q = (i & 1) ? sq1 : sq0;
  if (t >= qn) return;
  if (NM == 2) {
    const int r = r0 + g + (i >> 1) * 8;
    if (r < rows) y[(long long)q * rows + r] = swiglu_f(v[0], v[NA - 1], L);
  } else {
#pragma unroll
    for (int a = 0; a < NA; ++a) {
      const int r = r0 + 16 * a + g + (i >> 1) * 8;
      if (r < rows) y[(long long)q * rows + r] = v[a];
    }
  }
}

template <int NM, int MT, int S>
__device__ __forceinline__ void gvxr_body(float* __restrict__ y, const float* __restrict__ x, int xDiv,
                                          const int* __restrict__ order, const int* __restrict__ idx,
                                          const int* __restrict__ chunks, int maxChunks, const u64* __restrict__ tab1,
                                          const u64* __restrict__ tab3, int rows, int K, float L) {
  enum { NA = NM * MT };
  DYN_SHARED(uint4, ring);                    // [S][NA][2][NT] chunks, then [S][NT] scale words
  uint4* sring = ring + S * NA * 2 * GVXR_NT;  // a thread's 2·NA words (NA = 2) in one uint4
  // red[2][GVX_WARPS][4·NA][32] after the rings (dynamic: the kernel holds
  // both forms of this body, which would take two static buffers).
  float(*red)[GVX_WARPS][4 * NA][32] = (float(*)[GVX_WARPS][4 * NA][32])(sring + S * GVXR_NT);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  const int steps = K >> 7, rowBytes = K >> 1, scaleCols = K >> 5;
  const int J = (steps + GVX_WARPS - 1) / GVX_WARPS;  // tasks an item
  const int rb = (rows + 16 * MT - 1) / (16 * MT);     // items a tile
  const int ntiles = chunks[2 * maxChunks];
  const long long N = (long long)ntiles * rb;
  const int first = (int)(N * blockIdx.x / gridDim.x), last = (int)(N * (blockIdx.x + 1) / gridDim.x);
  const int tasks = (last - first) * J;
  auto slot = [&](int st, int a, int h) -> uint4* { return ring + ((st * NA + a) * 2 + h) * GVXR_NT + tid; };

  // The copying cursor: task `in` (item first + in / J, j = in % J).
  gvxr_tile<NM> ti;
  ti.y = -1;
  int inItem = first, inJ = 0, inR0 = 0;
  auto issue = [&](int n, int st) {
    if (n < tasks) {
      if (inJ == 0) {
        const int ty = inItem / rb;
        if (ty != ti.y) gvxr_load<NM>(ti, ty, order, idx, chunks, tab1, tab3);
        inR0 = (inItem - ty * rb) * 16 * MT;
      }
      const int s = warp + GVX_WARPS * inJ;
      if (s < steps) {
        u32* sw = (u32*)(sring + st * GVXR_NT + tid);
#pragma unroll
        for (int a = 0; a < NA; ++a)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const long long r = min(inR0 + 16 * (a % MT) + g + 8 * h, rows - 1);
            ring_copy16(slot(st, a, h), ti.wm[a / MT] + r * rowBytes + 64 * s + 16 * c);
            ring_copy4(sw + 2 * a + h, ti.sm[a / MT] + r * scaleCols + 4 * s);
          }
      }
      if (++inJ == J) inJ = 0, ++inItem;
    }
    ring_commit();
  };
#pragma unroll
  for (int st = 0; st < S - 1; ++st) issue(st, st);

  // The computing cursor.
  gvxr_tile<NM> ta;
  ta.y = -1;
  const float* xt = x;
  int sq0 = 0, sq1 = 0, r0 = 0, par = 0;
  float acc[NA][4];
#pragma unroll
  for (int a = 0; a < NA; ++a)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[a][i] = 0.0f;
  for (int n = 0, st = 0, item = first, j = 0; n < tasks; ++n) {
    ring_wait<S - 2>();
    issue(n + S - 1, st == 0 ? S - 1 : st - 1);
    if (j == 0) {
      const int ty = item / rb;
      if (ty != ta.y) {
        gvxr_load<NM>(ta, ty, order, idx, chunks, tab1, tab3);
        xt = x + (long long)(order[ta.q0 + min(g, ta.qn - 1)] / xDiv) * K;
        sq0 = order[ta.q0 + min(2 * c, ta.qn - 1)];
        sq1 = order[ta.q0 + min(2 * c + 1, ta.qn - 1)];
      }
      r0 = (item - ty * rb) * 16 * MT;
    }
    const int s = warp + GVX_WARPS * j;
    if (s < steps) {
      uint4 q[NA][2];
      u32 eb[NA][2];
      const uint4 sw = *(sring + st * GVXR_NT + tid);
#pragma unroll
      for (int a = 0; a < NA; ++a)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          q[a][h] = *slot(st, a, h);
          eb[a][h] = (word_of(sw, 2 * a + h) >> (8 * c)) & 0xFFu;
        }
      gvx_moe_step<NA>(acc, q, eb, xt, 128 * s + 32 * c);
    }
    if (++j == J) {
      gvxr_item_end<NM, MT, false>(red[par], acc, y, rows, r0, ta.qn, sq0, sq1, 1.0f, 1.0f, L);
      par ^= 1;
      j = 0;
      ++item;
    }
    st = st == S - 1 ? 0 : st + 1;
  }
}

// gemvx_moe_fp4_ring: gemvx_moe_fp4's products and arguments (gate/up
// when tab3 is set, else down), persistent (grid: at most 2 blocks an
// SM), maxChunks the length of moe_sort's list (its count of non-empty
// tiles after it).
#define GVXR_ENTRY(NAME, S)                                                                                         \
  extern "C" __global__ void __launch_bounds__(GVXR_NT, 2)                                                         \
      NAME(float* __restrict__ y, const float* __restrict__ x, int xDiv, const int* __restrict__ order,              \
           const int* __restrict__ idx, const int* __restrict__ chunks, int maxChunks, const u64* __restrict__ tab1, \
           const u64* __restrict__ tab3, int rows, int K, float L) {                                                 \
    PDL_WAIT();                                                                                                     \
    if (tab3)                                                                                                       \
      gvxr_body<2, 1, S>(y, x, xDiv, order, idx, chunks, maxChunks, tab1, tab3, rows, K, L);                       \
    else                                                                                                            \
      gvxr_body<1, 2, S>(y, x, xDiv, order, idx, chunks, maxChunks, tab1, tab3, rows, K, L);                       \
  }
GVXR_ENTRY(gemvx_moe_fp4_ring, 4)
GVXR_ENTRY(gemvx_moe_fp4_ring3, 3)

// ---- gvxh: the FP4 experts on the float16 tensor cores ----
//
// Why: gemvx_moe_fp4 and its ring (above) spend about 5.7 instructions a
// weight (ncu, batch 1: 18.0M warp instructions for 101M weights of gate
// and up), most of them placing each pair of codes as a bfloat16 pair,
// splitting the activations in every block again, and the scale's
// multiply on every pair; the float32 _sx kernels about 6.7. Either is
// bound by its instructions at 1.0-1.5 TB/s. This one: 4.4 (run 12; the
// experts of batch 64 in 6.1 ms against gemvx_moe_fp4's 8.0).
//
// Numerics (Fast mode): every weight is exact (e2m1 times 2^-6 as float16,
// times its UE8M0 scale applied in float32 to each 32-column block's
// sums); every activation row is scaled by a power of two 2^-ex (its
// largest magnitude into [2^14, 2^15)) and split as x = hi + lo, both
// float16 (round to nearest even): x is carried to about 2^-22 of its
// magnitude. mma.sync m16n8k16 (f16 in, f32 accumulate) multiplies W by
// hi and by lo; the products are exact, the sums float32.
//
// gvxh_split writes a row of activations as the kernel reads them: for
// each 8 columns 8u..8u+7 (u = 4·block + c), the hi words of the pairs
// (0, 2), (4, 6), (1, 3), (5, 7), then the lo words, and the row's
// factor 2^(6+ex) (the weights' 2^-6 and the row's scale, undone at the
// end). Grid: rows; 256 threads; K a multiple of 8.
//
// gemvx_moe_fp4_h is gemvx_moe_fp4_ring's schedule (persistent blocks,
// items of (tile, 16·MT rows), tasks (item, step), cp.async ring, sums of
// the warps in warp order) with another lane layout: lane (g, c) takes the
// 4-byte word c (codes 8c..8c+7) of each of the step's 4 blocks of 32
// columns of rows g and g+8, so that an mma's 16 columns are one block's
// (its scale applied to the mma's float32 sums). The chunks are copied as
// gvxr copies them (lane (g, c): block c of the step), at slots swizzled
// by g so that the lanes' 4-byte reads of a block hit 32 different banks.
// The codes of a word become e4m3 bytes (e2m1 times 2^-6: the sign at bit
// 7, the exponent's low bits and the mantissa at bits 4..2), four at once,
// and the hardware converts them to float16 pairs. The order of every sum
// depends on K alone: batch-invariant.


extern "C" __global__ void __launch_bounds__(256)
    gvxh_split(u32* __restrict__ xs, float* __restrict__ xsc, const float* __restrict__ x, int K) {
  PDL_WAIT();
  __shared__ u32 wmax[8];
  const int r = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float* xr = x + (long long)r * K;
  // The largest magnitude, compared as bits (NaN above infinity above
  // every number).
  u32 m = 0;
  for (int k = tid; k < K; k += 256) m = max(m, __float_as_uint(xr[k]) & 0x7FFFFFFFu);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = max(m, (u32)__shfl_xor_sync(0xFFFFFFFFu, (int)m, o));
  if (lane == 0) wmax[warp] = m;
  __syncthreads();
  m = wmax[0];
#pragma unroll
  for (int w = 1; w < 8; ++w) m = max(m, wmax[w]);
  // 2^fe with fe = 14 - e (e: m's binary exponent), within [-126, 126].
  const int e = (int)(m >> 23) - 127;
  const int fe = min(126, max(-126, 14 - e));
  const float f = __uint_as_float((u32)(fe + 127) << 23);
  if (tid == 0) xsc[r] = __uint_as_float((u32)(6 - fe + 127) << 23);
  u32* xw = xs + (long long)r * K;
  for (int u = tid; u < K / 8; u += 256) {
    const float4 p = __ldg((const float4*)(xr + 8 * u)), q = __ldg((const float4*)(xr + 8 * u) + 1);
    const float v[8] = {__fmul_rn(p.x, f), __fmul_rn(p.y, f), __fmul_rn(p.z, f), __fmul_rn(p.w, f),
                        __fmul_rn(q.x, f), __fmul_rn(q.y, f), __fmul_rn(q.z, f), __fmul_rn(q.w, f)};
    const int pr[4][2] = {{0, 2}, {4, 6}, {1, 3}, {5, 7}};
    u32 hi[4], lo[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float a = v[pr[i][0]], b = v[pr[i][1]];
      hi[i] = f16x2_rn(a, b);
      lo[i] = f16x2_rn(__fsub_rn(a, f16_lo(hi[i])), __fsub_rn(b, f16_hi(hi[i])));
    }
    uint4* d = (uint4*)(xw + 8 * u);
    d[0] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    d[1] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
  }
}

// e2m1x8_f16 decodes the 8 codes of w (code i at bits 4i..4i+3) into
// float16 pairs of e2m1 times 2^-6: f[0] = (code 0, code 2), f[1] = (4, 6),
// f[2] = (1, 3), f[3] = (5, 7), the first of each pair low.
__device__ __forceinline__ void e2m1x8_f16(u32 w, u32 (&f)[4]) {
#ifdef STRATA_EMU
  const int pr[4][2] = {{0, 2}, {4, 6}, {1, 3}, {5, 7}};
  for (int i = 0; i < 4; ++i)
    f[i] = f16_rn_soft(__fmul_rn(e2m1(w >> (4 * pr[i][0])), 0x1p-6f)) |
           (f16_rn_soft(__fmul_rn(e2m1(w >> (4 * pr[i][1])), 0x1p-6f)) << 16);
#else
  const u32 ev = ((w << 2) & 0x1C1C1C1Cu) | ((w << 4) & 0x80808080u);  // codes 0, 2, 4, 6 as e4m3 bytes
  const u32 od = ((w >> 2) & 0x1C1C1C1Cu) | (w & 0x80808080u);         // codes 1, 3, 5, 7
  asm("{\n.reg .b16 a, b, c, d;\nmov.b32 {a, b}, %4;\nmov.b32 {c, d}, %5;\n"
      "cvt.rn.f16x2.e4m3x2 %0, a;\ncvt.rn.f16x2.e4m3x2 %1, b;\ncvt.rn.f16x2.e4m3x2 %2, c;\ncvt.rn.f16x2.e4m3x2 %3, d;\n}"
      : "=r"(f[0]), "=r"(f[1]), "=r"(f[2]), "=r"(f[3])
      : "r"(ev), "r"(od));
#endif
}

// gvxh_swz is the slot (of a warp's 32) where lane (g, j) keeps its
// chunk: lanes of even and odd g apart, and the four g of each in
// different 16-byte bank groups for every block j read.
__device__ __forceinline__ int gvxh_swz(int g, int j) { return 4 * g + (j ^ ((g >> 1) & 3)); }

template <int NM, int MT, int S>
__device__ __forceinline__ void gvxh_body(float* __restrict__ y, const u32* __restrict__ xs,
                                          const float* __restrict__ xsc, int xDiv, const int* __restrict__ order,
                                          const int* __restrict__ idx, const int* __restrict__ chunks, int maxChunks,
                                          const u64* __restrict__ tab1, const u64* __restrict__ tab3, int rows, int K,
                                          float L) {
  enum { NA = NM * MT };
  DYN_SHARED(uint4, ring);                    // [S][NA][2][NT] chunks, then [S][NT] scale words
  uint4* sring = ring + S * NA * 2 * GVXR_NT;  // a thread's 2·NA words (NA = 2) in one uint4
  float(*red)[GVX_WARPS][4 * NA][32] = (float(*)[GVX_WARPS][4 * NA][32])(sring + S * GVXR_NT);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  const int steps = K >> 7, rowBytes = K >> 1, scaleCols = K >> 5;
  const int J = (steps + GVX_WARPS - 1) / GVX_WARPS;
  const int rb = (rows + 16 * MT - 1) / (16 * MT);
  const int ntiles = chunks[2 * maxChunks];
  const long long N = (long long)ntiles * rb;
  const int first = (int)(N * blockIdx.x / gridDim.x), last = (int)(N * (blockIdx.x + 1) / gridDim.x);
  const int tasks = (last - first) * J;
  const int mine = warp * 32 + gvxh_swz(g, c);  // this lane's slot (its copy)
  auto slot = [&](int st, int a, int h, int at) -> uint4* { return ring + ((st * NA + a) * 2 + h) * GVXR_NT + at; };

  gvxr_tile<NM> ti;
  ti.y = -1;
  int inItem = first, inJ = 0;
  // The copying lane's rows of the item being copied: its chunks' and its
  // scale words' addresses at step 0 (a step adds 64 and 4 bytes).
  const u8* cpw[NA][2];
  const u8* csw[NA][2];
  auto issue = [&](int n, int st) {
    if (n < tasks) {
      if (inJ == 0) {
        const int ty = inItem / rb;
        if (ty != ti.y) gvxr_load<NM>(ti, ty, order, idx, chunks, tab1, tab3);
        const int inR0 = (inItem - ty * rb) * 16 * MT;
#pragma unroll
        for (int a = 0; a < NA; ++a)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const long long r = min(inR0 + 16 * (a % MT) + g + 8 * h, rows - 1);
            cpw[a][h] = ti.wm[a / MT] + r * rowBytes + 16 * c + 64 * warp;
            csw[a][h] = ti.sm[a / MT] + r * scaleCols + 4 * warp;
          }
      }
      if (warp + GVX_WARPS * inJ < steps) {
        u32* sw = (u32*)(sring + st * GVXR_NT + tid);
#pragma unroll
        for (int a = 0; a < NA; ++a)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            ring_copy16(slot(st, a, h, mine), cpw[a][h] + 64 * GVX_WARPS * inJ);
            ring_copy4(sw + 2 * a + h, csw[a][h] + 4 * GVX_WARPS * inJ);
          }
      }
      if (++inJ == J) inJ = 0, ++inItem;
    }
    ring_commit();
  };
#pragma unroll
  for (int st = 0; st < S - 1; ++st) issue(st, st);

  gvxr_tile<NM> ta;
  ta.y = -1;
  const uint4* xw = (const uint4*)xs;
  float cs0 = 0.0f, cs1 = 0.0f;
  int sq0 = 0, sq1 = 0, r0 = 0, par = 0;
  float acc[NA][4];
#pragma unroll
  for (int a = 0; a < NA; ++a)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[a][i] = 0.0f;
  for (int n = 0, st = 0, item = first, j = 0; n < tasks; ++n) {
    // A lane reads its warp's other lanes' chunks (ring.cuh's rings have
    // each thread read its own), so the warp syncs twice a task: before
    // the copies into stage st - 1 (read at the task before by other
    // lanes), and after the wait for this task's copies (each lane's wait
    // covers its own, the sync makes them the warp's). The task's
    // activations are loaded before the wait, their latency under it.
    // (Each lane copying the words it reads instead, with no syncs, was
    // 8-12% slower at batches 16-256: run 13, A/B gvxh-own.)
    __syncwarp();
    issue(n + S - 1, st == 0 ? S - 1 : st - 1);
    if (j == 0) {
      const int ty = item / rb;
      if (ty != ta.y) {
        gvxr_load<NM>(ta, ty, order, idx, chunks, tab1, tab3);
        xw = (const uint4*)(xs + (long long)(order[ta.q0 + min(g, ta.qn - 1)] / xDiv) * K);
        sq0 = order[ta.q0 + min(2 * c, ta.qn - 1)];
        sq1 = order[ta.q0 + min(2 * c + 1, ta.qn - 1)];
        cs0 = xsc[sq0 / xDiv];
        cs1 = xsc[sq1 / xDiv];
      }
      r0 = (item - ty * rb) * 16 * MT;
    }
    const int s = warp + GVX_WARPS * j;
    // The step's activations: block 4s + b's hi and lo words of this
    // lane's 8 columns (token g's).
    uint4 xh[4], xl[4];
    if (s < steps) {
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        xh[b] = __ldg(xw + 2 * (4 * (4 * s + b) + c));
        xl[b] = __ldg(xw + 2 * (4 * (4 * s + b) + c) + 1);
      }
    }
    ring_wait<S - 1>();  // this task's group: S + n committed, n + 1 done
    __syncwarp();
    if (s < steps) {
      const uint4 sw = *(sring + st * GVXR_NT + tid);
      // The scale bytes as float32 by placing them as exponents; a byte 0
      // (2^-127, subnormal) or 255 (NaN) anywhere takes ue8m0 instead.
      u32 special = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const u32 v = word_of(sw, i), nv = ~v;
        special |= ((v - 0x01010101u) & nv) | ((nv - 0x01010101u) & v);
      }
      const bool plain = (special & 0x80808080u) == 0;
#pragma unroll
      for (int a = 0; a < NA; ++a) {
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          // Word c of lane (g, b)'s chunks: one 4-byte shared load each.
          const int at = warp * 32 + gvxh_swz(g, b);
          const u32 wg = ((const u32*)slot(st, a, 0, at))[c];
          const u32 wg8 = ((const u32*)slot(st, a, 1, at))[c];
          u32 fg[4], fg8[4];
          e2m1x8_f16(wg, fg);
          e2m1x8_f16(wg8, fg8);
          // The hi and lo products in two chains (dh, dl) of two mmas.
          float dh[4] = {0.0f, 0.0f, 0.0f, 0.0f}, dl[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          const u32 a1[4] = {fg[0], fg8[0], fg[1], fg8[1]}, a2[4] = {fg[2], fg8[2], fg[3], fg8[3]};
          const u32 h1[2] = {xh[b].x, xh[b].y}, l1[2] = {xl[b].x, xl[b].y};
          const u32 h2[2] = {xh[b].z, xh[b].w}, l2[2] = {xl[b].z, xl[b].w};
          mma_f16(dh, a1, h1);
          mma_f16(dl, a1, l1);
          mma_f16(dh, a2, h2);
          mma_f16(dl, a2, l2);
          const u32 e0 = word_of(sw, 2 * a), e8 = word_of(sw, 2 * a + 1);
          const float rg = plain ? __uint_as_float(b < 3 ? (e0 << (23 - 8 * b)) & 0x7F800000u : (e0 >> 1) & 0x7F800000u)
                                 : ue8m0((e0 >> (8 * b)) & 0xFFu);
          const float rg8 = plain ? __uint_as_float(b < 3 ? (e8 << (23 - 8 * b)) & 0x7F800000u : (e8 >> 1) & 0x7F800000u)
                                  : ue8m0((e8 >> (8 * b)) & 0xFFu);
          acc[a][0] = __fmaf_rn(__fadd_rn(dh[0], dl[0]), rg, acc[a][0]);
          acc[a][1] = __fmaf_rn(__fadd_rn(dh[1], dl[1]), rg, acc[a][1]);
          acc[a][2] = __fmaf_rn(__fadd_rn(dh[2], dl[2]), rg8, acc[a][2]);
          acc[a][3] = __fmaf_rn(__fadd_rn(dh[3], dl[3]), rg8, acc[a][3]);
        }
      }
    }
    if (++j == J) {
      gvxr_item_end<NM, MT, true>(red[par], acc, y, rows, r0, ta.qn, sq0, sq1, cs0, cs1, L);
      par ^= 1;
      j = 0;
      ++item;
    }
    st = st == S - 1 ? 0 : st + 1;
  }
}

// gemvx_moe_fp4_h: y[pair] = SwiGLU(W1·x, W3·x) (tab3 set) or W·x, x
// given as gvxh_split's words xs and factors xsc (row pair / xDiv);
// persistent (at most 2 blocks an SM); dynamic shared memory as
// gemvx_moe_fp4_ring's.
#define GVXH_ENTRY(NAME, S)                                                                                       \
  extern "C" __global__ void __launch_bounds__(GVXR_NT, 2)                                                        \
      NAME(float* __restrict__ y, const u32* __restrict__ xs, const float* __restrict__ xsc, int xDiv,            \
           const int* __restrict__ order, const int* __restrict__ idx, const int* __restrict__ chunks,            \
           int maxChunks, const u64* __restrict__ tab1, const u64* __restrict__ tab3, int rows, int K, float L) { \
    PDL_WAIT();                                                                                                   \
    if (tab3)                                                                                                     \
      gvxh_body<2, 1, S>(y, xs, xsc, xDiv, order, idx, chunks, maxChunks, tab1, tab3, rows, K, L);                \
    else                                                                                                          \
      gvxh_body<1, 2, S>(y, xs, xsc, xDiv, order, idx, chunks, maxChunks, tab1, tab3, rows, K, L);                \
  }
GVXH_ENTRY(gemvx_moe_fp4_h, 4)
