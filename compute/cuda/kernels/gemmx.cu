// gemmx.cu: the Fast product on the tensor cores for more than
// FastGEMVMaxT tokens, y[t] = W·x[t] with x split inside the kernel.
//
// Numerics: the weights (BF16, FP8 e4m3 times its UE8M0 scale, FP4 e2m1
// times its scale) are dequantized exactly to bfloat16; every activation
// is split as x = hi + lo with hi = bf16(x) and lo = bf16(x - hi) (round
// to nearest even, as split_bf16 and gemm.cu did in three launches), and
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
// activations of the next XSTAGES-1 tiles are in flight (cp.async into
// dynamic shared memory) while this one is multiplied: each thread copies
// its own 16 weight columns of one row and 8 activations of one token, and
// decodes exactly the bytes it copied into the bfloat16 tiles, so only the
// tiles need the block's barrier.

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

// gemmx_chunk: the bytes of a thread's 16 weight columns of one row.
template <int FMT>
struct gemmx_chunk {
  static constexpr int bytes = FMT == FMT_FP8 ? 16 : (FMT == FMT_FP4 ? 8 : 32);
};

// gemmx_stage_bytes: one stage of dynamic shared memory, the block's raw
// weights (256 chunks) and activations (64 tokens x 32 float32s).
template <int FMT>
__host__ __device__ constexpr int gemmx_stage_bytes() {
  return 256 * gemmx_chunk<FMT>::bytes + XN * XK * 4;
}

// decode16 turns a thread's raw chunk (16 columns from column k of row
// row) into 8 pairs of bfloat16.
template <int FMT>
__device__ __forceinline__ void decode16(u32* o, const u8* raw, const u8* __restrict__ sc, int row, int k, int M,
                                         int K, int blockRows, int blockCols, int scaleCols) {
  if (FMT == FMT_BF16) {
    const uint4 a = *(const uint4*)raw, b = *(const uint4*)(raw + 16);
    o[0] = a.x; o[1] = a.y; o[2] = a.z; o[3] = a.w; o[4] = b.x; o[5] = b.y; o[6] = b.z; o[7] = b.w;
  } else if (FMT == FMT_FP8) {
    const uint4 q = *(const uint4*)raw;
    const float s = row < M ? ue8m0(__ldg(sc + (row / blockRows) * scaleCols + k / blockCols)) : 1.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const u32 v = word_of(q, j);
      o[2 * j] = pack2(bf16_exact(__fmul_rn(e4m3(v & 0xFF), s)), bf16_exact(__fmul_rn(e4m3((v >> 8) & 0xFF), s)));
      o[2 * j + 1] =
          pack2(bf16_exact(__fmul_rn(e4m3((v >> 16) & 0xFF), s)), bf16_exact(__fmul_rn(e4m3(v >> 24), s)));
    }
  } else {  // FMT_FP4
    const uint2 q = *(const uint2*)raw;
    const float s = row < M ? ue8m0(__ldg(sc + (long long)row * (K / 32) + k / 32)) : 1.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const u32 v = j < 4 ? q.x >> (8 * j) : q.y >> (8 * (j - 4));
      o[j] = pack2(bf16_exact(__fmul_rn(e2m1(v), s)), bf16_exact(__fmul_rn(e2m1(v >> 4), s)));
    }
  }
}

// gemmx_body: block (x, y, z) computes rows [128x, 128x+128) for tokens
// [64y, 64y+64) of group z / (S/per), parts [p·per, p·per+per) with p =
// z % (S/per). x is group g's input at x + g·xgs, rows ldx floats apart;
// W is w (or group g's matrix from tab, [G][data, scale]). per == S:
// y[t·ldy + g·ygs + r]; per == 1: the part's sums at
// part[((g·S + p)·N + t)·M + r].
template <int FMT>
__device__ __forceinline__ void gemmx_body(float* __restrict__ y, float* __restrict__ part, const float* __restrict__ x,
                                           const u8* __restrict__ w, const u8* __restrict__ sc,
                                           const u64* __restrict__ tab, int M, int K, int N, int ldx, int xgs,
                                           int ldy, int ygs, int blockRows, int blockCols, int scaleCols, int S,
                                           int per) {
  DYN_SHARED(u8, smem);
  constexpr int CB = gemmx_chunk<FMT>::bytes, WB = 256 * CB, SB = gemmx_stage_bytes<FMT>();
  u16* A = (u16*)(smem + XSTAGES * SB);
  u16* Bh = A + XM * XS;
  u16* Bl = Bh + XN * XS;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int nParts = S / per, g = blockIdx.z / nParts, p = blockIdx.z % nParts;
  if (tab) {
    w = (const u8*)tab[2 * g];
    sc = (const u8*)tab[2 * g + 1];
  }
  x += (long long)g * xgs;
  const int m0 = blockIdx.x * XM, n0 = blockIdx.y * XN;
  const int tilesPart = K / XK / S, kt0 = p * per * tilesPart, nt = per * tilesPart;
  const int lr = tid >> 1, lk = (tid & 1) * 16;  // the weight chunk: row, first column
  const int lt = tid >> 2, lc = (tid & 3) * 8;   // the activations: token, first column
  const int row = m0 + lr, tok = n0 + lt;
  const bool rowOK = row < M, tokOK = tok < N;
  const u8* wrow = w + (rowOK ? (long long)row : 0) * (FMT == FMT_FP4 ? K / 2 : (FMT == FMT_BF16 ? 2 * K : K));
  const float* xrow = x + (tokOK ? (long long)tok : 0) * ldx;

  // issue queues tile i's copies (or none past the last) as one group.
  auto issue = [&](int i) {
    if (i < nt) {
      const int k = (kt0 + i) * XK;
      u8* st = smem + (i % XSTAGES) * SB;
      if (FMT == FMT_FP8) {
        cp_async<16>(st + tid * 16, wrow + k + lk, rowOK);
      } else if (FMT == FMT_FP4) {
        cp_async<8>(st + tid * 8, wrow + (k + lk) / 2, rowOK);
      } else {
        cp_async<16>(st + tid * 32, wrow + 2 * (k + lk), rowOK);
        cp_async<16>(st + tid * 32 + 16, wrow + 2 * (k + lk) + 16, rowOK);
      }
      cp_async<16>(st + WB + tid * 32, xrow + k + lc, tokOK);
      cp_async<16>(st + WB + tid * 32 + 16, xrow + k + lc + 4, tokOK);
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
    cp_async_wait();
    const u8* st = smem + (i % XSTAGES) * SB;
    const int k = (kt0 + i) * XK;
    u32 o[8];
    decode16<FMT>(o, st + tid * CB, sc, row, k + lk, M, K, blockRows, blockCols, scaleCols);
    store8(&A[lr * XS + lk], o);
    const float* xv = (const float*)(st + WB + tid * 32);
    u32 h[4], l[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      u32 hb[2], lb[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float v = xv[2 * j + e];
        hb[e] = bf16_rn(v);
        lb[e] = bf16_rn(__fsub_rn(v, __uint_as_float(hb[e] << 16)));
      }
      h[j] = pack2(hb[0], hb[1]);
      l[j] = pack2(lb[0], lb[1]);
    }
    *(uint4*)&Bh[lt * XS + lc] = make_uint4(h[0], h[1], h[2], h[3]);
    *(uint4*)&Bl[lt * XS + lc] = make_uint4(l[0], l[1], l[2], l[3]);
    issue(i + XSTAGES - 1);  // into the stage this thread decoded last time
    __syncthreads();

#pragma unroll
    for (int ks = 0; ks < XK; ks += 16) {
      u32 af[2][4], bh[4][2], bl[4][2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) ldmatrix_x4(af[mt], &A[(wm + mt * 16 + (lane & 15)) * XS + ks + (lane >> 4) * 8]);
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        const int off = (wn + np * 16 + (lane & 7) + ((lane >> 4) << 3)) * XS + ks + ((lane >> 3) & 1) * 8;
        u32 t[4];
        ldmatrix_x4(t, &Bh[off]);
        bh[2 * np][0] = t[0]; bh[2 * np][1] = t[1]; bh[2 * np + 1][0] = t[2]; bh[2 * np + 1][1] = t[3];
        ldmatrix_x4(t, &Bl[off]);
        bl[2 * np][0] = t[0]; bl[2 * np][1] = t[1]; bl[2 * np + 1][0] = t[2]; bl[2 * np + 1][1] = t[3];
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int n = 0; n < 4; ++n) {
          mma_bf16(acc[mt][n], af[mt], bh[n]);
          mma_bf16(acc[mt][n], af[mt], bl[n]);
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
    __syncthreads();
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
        if (per == S) {
          y[(long long)t * ldy + (long long)g * ygs + r] = tot[mt][n][e];
        } else {
          part[(((long long)g * S + p) * N + t) * M + r] = tot[mt][n][e];
        }
      }
}

#define GEMMX_ENTRY(NAME, FMT)                                                                                     \
  extern "C" __global__ void __launch_bounds__(256, 2)                                                            \
      NAME(float* __restrict__ y, float* __restrict__ part, const float* __restrict__ x, const u8* __restrict__ w, \
           const u8* __restrict__ sc, const u64* __restrict__ tab, int M, int K, int N, int ldx, int xgs, int ldy, \
           int ygs, int blockRows, int blockCols, int scaleCols, int S, int per) {                                 \
    PDL_WAIT();                                                                                                    \
    gemmx_body<FMT>(y, part, x, w, sc, tab, M, K, N, ldx, xgs, ldy, ygs, blockRows, blockCols, scaleCols, S, per); \
  }
GEMMX_ENTRY(gemmx_bf16, FMT_BF16)
GEMMX_ENTRY(gemmx_fp8, FMT_FP8)
GEMMX_ENTRY(gemmx_fp4, FMT_FP4)

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
