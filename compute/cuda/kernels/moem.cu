// moem.cu: Fast mode's FP4 experts for tiles of 1, 2 and 4 pairs on the
// FP8 tensor cores (mma.sync m16n8k32 e4m3, sm_89 and later): the
// products moeq (moe.cu) computes on dp4a, with the integer work moved to
// the tensor cores.
//
// Why: moeq spends ~4.6 instructions a weight, about half of them on the
// ALU pipe (table lookups, dp4a), and runs issue-bound at ~2.2 TB/s (run
// 14's ncu). Here a code becomes an e4m3 byte by placement alone: e2m1's
// sign at bit 7 and its exponent and mantissa bits at bits 4..2 give
// e2m1·2^-6 exactly (subnormal codes included), four codes of a word in
// 3-4 instructions (moem_even, moem_odd); one mma multiplies 16 rows of
// 32 codes (one scale block) by the activations' digits: about 1.6
// instructions a weight.
//
// Numerics (moeq's): each 32-column block of a pair's activations is
// scaled by 2^(21-e) (e: the exponent of its largest magnitude) and rounded
// to the integer x_int (|x_int| <= 2^22): x is carried to 2^-22 of its
// block's largest value. x_int is split into six balanced base-16 digits
// d_0..d_5 (d_k in [-8, 8), d_5 in [-5, 5]), each exactly an e4m3 byte;
// digit k is column k of the mma's B (columns 6 and 7 zero). Each product
// of a code and a digit is exact and the 32 of a column sum to an integer
// multiple of 2^-7 under 2^5 (at most 12 significant bits), exact in the
// mma's float32 sum. That sum C_k, times the row's scale and the block's
// factor 2^(e-15) (one float32 multiply and one fused multiply-add), is
// added to the row's float32 accumulator of digit k; at the row's end the
// digits are combined as Σ_k 16^k·acc_k (lane t holds k = 2t, 2t+1: one
// fused multiply-add, then two shuffles over the lanes). A block holding a
// NaN or an infinity contributes NaN; one of magnitudes under 2^-100, 0.
//
// Order: every output is the sum over the 8 warps' column slices (in warp
// order) of each slice's blocks (in column order) per digit, then the
// digits as above: it depends on the matrix's shape only, never on the
// tile's size, the other pairs, G or the batch (batch-invariant among the
// batches that take it). Other bits than moeq's.
//
// Block (x, y): row tiles [x·G, (x+1)·G) (16 rows each; of W1 and W3 both
// with NM = 2, SwiGLU fused) of tile y's expert for the tile's pairs
// p0 .. p0+PT-1 (the host launches tiles of 8 pairs as two halves). Warp w
// takes the steps [w·n/8, (w+1)·n/8) of a row tile's n = cols/128 steps of
// MOEM_BS blocks; lane (g, c) = (lane/4, lane%4) reads word c of rows g and
// g + 8 of each block (the mma's A fragment, columns 8c + 2i as k = 4c + i
// and 8c + 2i + 1 as k = 16 + 4c + i) and B's words for digit g at the same
// columns. Dynamic shared memory (moemShared in moeops.go): the weights'
// ring (S stages of a warp's NM·16·MOEM_BS 16-byte chunks, [m][block][row],
// so that a warp's 32 lanes read 32 consecutive words), the scale words'
// ring (4 blocks' bytes of a row a word), the pairs' digits (48 words a
// block) and factors, then the warps' partial sums (two buffers).

#define MOEM_BS 4
#define MOEM_ROUNDS 4

// moem_even places the codes of w's low nibbles (columns 0, 2, 4, 6 of the
// word) as e4m3 bytes of e2m1·2^-6; moem_odd those of the high nibbles.
__device__ __forceinline__ u32 moem_even(u32 w) { return ((w << 2) & 0x1C1C1C1Cu) | ((w << 4) & 0x80808080u); }
__device__ __forceinline__ u32 moem_odd(u32 w) { return ((w >> 2) & 0x1C1C1C1Cu) | (w & 0x80808080u); }

// mma_e4m3 is d += A·B for one m16n8k32 tile of e4m3 operands (row.col,
// float32 accumulate). The emulator gathers the fragments through
// shuffles (lane l holds A rows l/4 and l/4 + 8, columns 4(l%4) + {0..3}
// and 16 + 4(l%4) + {0..3}; B column l/4, the same rows; C as m16n8k16's)
// and adds the exact products in float64, rounded once: what the hardware
// gives for moem's sums, which are exact in float32.
#ifdef STRATA_EMU
__device__ __forceinline__ void mma_e4m3(float* d, const u32* a, const u32* b) {
  const int lane = threadIdx.x & 31;
  float A[16][32], B[32][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, t = l & 3;
    u32 ar[4], br[2];
    for (int i = 0; i < 4; ++i) ar[i] = __shfl_sync(0xFFFFFFFFu, a[i], l);
    for (int i = 0; i < 2; ++i) br[i] = __shfl_sync(0xFFFFFFFFu, b[i], l);
    for (int i = 0; i < 4; ++i) {
      A[g][4 * t + i] = e4m3(ar[0] >> (8 * i));
      A[g + 8][4 * t + i] = e4m3(ar[1] >> (8 * i));
      A[g][16 + 4 * t + i] = e4m3(ar[2] >> (8 * i));
      A[g + 8][16 + 4 * t + i] = e4m3(ar[3] >> (8 * i));
      B[4 * t + i][g] = e4m3(br[0] >> (8 * i));
      B[16 + 4 * t + i][g] = e4m3(br[1] >> (8 * i));
    }
  }
  const int g = lane >> 2, t = lane & 3;
  for (int e = 0; e < 4; ++e) {
    const int r = g + (e >> 1) * 8, c = 2 * t + (e & 1);
    double acc = d[e];
    for (int k = 0; k < 32; ++k) acc += (double)A[r][k] * (double)B[k][c];
    d[e] = (float)acc;
  }
}
#else
__device__ __forceinline__ void mma_e4m3(float* d, const u32* a, const u32* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}
#endif

// moem_digit returns the e4m3 byte of the integer d, |d| <= 8.
__device__ __forceinline__ u32 moem_digit(int d) {
  const u32 a = (u32)(d < 0 ? -d : d);
  const u32 m = a >= 8 ? 0x50u : (u32)((0x4E4C4A4844403800ull >> (8 * a)) & 0xFFu);
  return d < 0 ? m | 0x80u : m;
}

// moem_stage writes one pair's activations (xr, cols floats, cols a
// multiple of 32) as B fragments: word (b·6 + k)·8 + 2c + h of xb holds
// digit k of block b's columns 8c + 2i + h (byte i), xf[b] the block's
// factor 2^(e-15) (NaN for a block holding a NaN or an infinity). Each
// thread takes 4 columns a round, 8 consecutive lanes a block (their
// largest magnitude by shuffles, as moeq_stage); every thread of the
// block calls it, and the caller syncs.
__device__ __forceinline__ void moem_stage(u32* xb, float* xf, const float* xr, int cols) {
  const int cols4 = cols / 4;
  for (int v0 = 0; v0 < cols4; v0 += MOEM_ROUNDS * blockDim.x) {  // whole warps a round: the shuffles
    float f[MOEM_ROUNDS][4];
#pragma unroll
    for (int u = 0; u < MOEM_ROUNDS; ++u) {
      const int v = v0 + u * blockDim.x + threadIdx.x;
      f[u][0] = f[u][1] = f[u][2] = f[u][3] = 0.0f;
      if (v < cols4) {
        const float4 q = __ldg((const float4*)xr + v);
        f[u][0] = q.x, f[u][1] = q.y, f[u][2] = q.z, f[u][3] = q.w;
      }
    }
#pragma unroll
    for (int u = 0; u < MOEM_ROUNDS; ++u) {
      const int v = v0 + u * blockDim.x + threadIdx.x;
      u32 m = 0;  // the block's largest magnitude as bits (NaN above infinity above every number)
#pragma unroll
      for (int i = 0; i < 4; ++i) m = max(m, __float_as_uint(f[u][i]) & 0x7FFFFFFFu);
#pragma unroll
      for (int o = 1; o < 8; o <<= 1) m = max(m, (u32)__shfl_xor_sync(0xFFFFFFFFu, (int)m, o));
      const bool fin = m < 0x7F800000u;
      const int e = max((int)(m >> 23) - 127, -100);
      const float S = __uint_as_float((u32)(21 - e + 127) << 23);  // |x·S| <= 2^22
      int dg[4][6];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        int r = fin ? __float2int_rn(__fmul_rn(f[u][i], S)) : 0;
#pragma unroll
        for (int k = 0; k < 5; ++k) {
          const int dk = ((r + 8) & 15) - 8;  // balanced: r = dk + 16·r'
          dg[i][k] = dk;
          r = (r - dk) >> 4;
        }
        dg[i][5] = r;
      }
      if (v < cols4) {
        const int b = v / 8, j = v & 7, c = j >> 1, h = j & 1;
#pragma unroll
        for (int k = 0; k < 6; ++k) {
          // Columns 4j + {0, 2} are the even columns 8c + 2(2h + {0, 1}):
          // bytes 2h, 2h + 1 of word 2c; 4j + {1, 3} those of word 2c + 1.
          u16* w = (u16*)(xb + (b * 6 + k) * 8 + 2 * c);
          w[h] = (u16)(moem_digit(dg[0][k]) | (moem_digit(dg[2][k]) << 8));
          w[2 + h] = (u16)(moem_digit(dg[1][k]) | (moem_digit(dg[3][k]) << 8));
        }
        if (j == 0) xf[b] = fin ? __uint_as_float((u32)(e - 15 + 127) << 23) : __uint_as_float(QNAN_BITS);
      }
    }
  }
}

template <int NM, int PT, int S>
__device__ __forceinline__ void moem_body(float* y, const float* x, int xDiv, const int* order, const int* idx,
                                          const int* chunks, const u64* tab1, const u64* tab3, int rows, int cols,
                                          float L, int G, int p0) {
  enum { NW = 8, BS = MOEM_BS, CH = NM * 16 * MOEM_BS, CPL = CH / 32, NSW = NM * 16 };
  const int nblk = cols / 32;
  DYN_SHARED(uint4, ring);                      // [S][NW][CH] 16-byte chunks
  u32* sring = (u32*)(ring + S * NW * CH);      // [S][NW][NSW] scale words
  u32* xb = sring + S * NW * NSW;               // [PT][nblk][48] digits
  float* xf = (float*)(xb + PT * nblk * 48);    // [PT][nblk] factors
  float* red = xf + PT * nblk;                  // [2][NW][NM][PT][16] partial sums
  __shared__ int sq[PT];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int q0 = chunks[2 * blockIdx.y] + p0, qn = min(chunks[2 * blockIdx.y + 1] - p0, (int)PT);
  if (qn <= 0) return;
  if (tid < PT) sq[tid] = order[q0 + min(tid, qn - 1)];
  __syncthreads();
  const int gt0 = blockIdx.x * G, ng = min(G, (rows + 15) / 16 - gt0);
  if (ng <= 0) return;
  const int e = idx[sq[0]];
  const u32 rowBytes = (u32)cols / 2, scaleCols = (u32)cols / 32;
  const u8* wm[NM];
  const u8* sm[NM];
  wm[0] = (const u8*)tab1[2 * e];
  sm[0] = (const u8*)tab1[2 * e + 1];
  if (NM == 2) {
    wm[NM - 1] = (const u8*)tab3[2 * e];
    sm[NM - 1] = (const u8*)tab3[2 * e + 1];
  }
  const int nst = nblk / BS, s0 = warp * nst / NW, nsw = (warp + 1) * nst / NW - s0;

  // issue queues step (ig, ij)'s copies (the warp's 16 rows of each matrix
  // at its slice's step ij, and their scale words) into stage st and
  // commits them; an empty group past the warp's last step.
  int ig = 0, ij = 0;
  auto issue = [&](int st) {
    if (ig < ng && nsw > 0) {
      const int r0 = (gt0 + ig) * 16;
      const u32 b0 = (u32)(s0 + ij) * BS;
      uint4* dst = ring + (st * NW + warp) * CH;
#pragma unroll
      for (int i = 0; i < CPL; ++i) {
        const int q = lane + 32 * i, row = q & 15, blk = (q >> 4) % BS, m = q / (16 * BS);
        const u32 r = (u32)min(r0 + row, rows - 1);
        ring_copy16(dst + q, wm[m] + r * rowBytes + (b0 + blk) * 16u);
      }
      if (lane < NSW) {
        const u32 r = (u32)min(r0 + (lane & 15), rows - 1);
        ring_copy4(sring + (st * NW + warp) * NSW + lane, sm[lane >> 4] + r * scaleCols + b0);
      }
      if (++ij == nsw) ij = 0, ++ig;
    }
    ring_commit();
  };
#pragma unroll
  for (int st = 0; st < S - 1; ++st) issue(st);

  // Stage the pairs' activations (the weights' first copies are in flight).
  for (int pi = 0; pi < qn; ++pi)
    moem_stage(xb + pi * nblk * 48, xf + pi * nblk, x + (long long)(sq[pi] / xDiv) * cols, cols);
  __syncthreads();

  float acc[NM][PT][4];
#pragma unroll
  for (int m = 0; m < NM; ++m)
#pragma unroll
    for (int pi = 0; pi < PT; ++pi) acc[m][pi][0] = acc[m][pi][1] = acc[m][pi][2] = acc[m][pi][3] = 0.0f;
  const float f0 = __uint_as_float((u32)(127 + 8 * t) << 23), f1 = __uint_as_float((u32)(127 + 8 * t + 4) << 23);
  int st = 0;
  for (int gi = 0; gi < ng; ++gi) {
    for (int j = 0; j < nsw; ++j) {
      // Step j's copies have landed (this thread's; the warp sync makes the
      // other lanes' visible); the stage issued now was last read at the
      // step before, by this warp.
      ring_wait<S - 2>();
      __syncwarp();
      issue(st == 0 ? S - 1 : st - 1);
      const u32* wst = (const u32*)(ring + (st * NW + warp) * CH);
      const u32* sst = sring + (st * NW + warp) * NSW;
      u32 swd[NM][2];
#pragma unroll
      for (int m = 0; m < NM; ++m) swd[m][0] = sst[m * 16 + g], swd[m][1] = sst[m * 16 + g + 8];
      const int kb0 = (s0 + j) * BS;
#pragma unroll
      for (int blk = 0; blk < BS; ++blk) {
        u32 a[NM][4];
        float sw[NM][2];
#pragma unroll
        for (int m = 0; m < NM; ++m) {
          const u32 w0 = wst[((m * BS + blk) * 16 + g) * 4 + t], w1 = wst[((m * BS + blk) * 16 + g + 8) * 4 + t];
          a[m][0] = moem_even(w0), a[m][1] = moem_even(w1), a[m][2] = moem_odd(w0), a[m][3] = moem_odd(w1);
          sw[m][0] = ue8m0((swd[m][0] >> (8 * blk)) & 0xFFu);
          sw[m][1] = ue8m0((swd[m][1] >> (8 * blk)) & 0xFFu);
        }
#pragma unroll
        for (int pi = 0; pi < PT; ++pi) {
          if (pi < qn) {
            const int xo = pi * nblk + kb0 + blk;
            const uint2 bv = g < 6 ? *(const uint2*)(xb + xo * 48 + g * 8 + 2 * t) : make_uint2(0u, 0u);
            const u32 b[2] = {bv.x, bv.y};
            const float sx = xf[xo];
#pragma unroll
            for (int m = 0; m < NM; ++m) {
              float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
              mma_e4m3(c, a[m], b);
              const float mg = __fmul_rn(sw[m][0], sx), mg8 = __fmul_rn(sw[m][1], sx);
              acc[m][pi][0] = __fmaf_rn(c[0], mg, acc[m][pi][0]);
              acc[m][pi][1] = __fmaf_rn(c[1], mg, acc[m][pi][1]);
              acc[m][pi][2] = __fmaf_rn(c[2], mg8, acc[m][pi][2]);
              acc[m][pi][3] = __fmaf_rn(c[3], mg8, acc[m][pi][3]);
            }
          }
        }
      }
      st = st == S - 1 ? 0 : st + 1;
    }
    // The row tile's end: each warp's slice, digits combined, into red;
    // then 16·PT threads sum the slices in warp order.
    float* rd = red + (gi & 1) * NW * NM * PT * 16;
#pragma unroll
    for (int m = 0; m < NM; ++m)
#pragma unroll
      for (int pi = 0; pi < PT; ++pi) {
        float vg = __fmaf_rn(acc[m][pi][1], f1, __fmul_rn(acc[m][pi][0], f0));
        float v8 = __fmaf_rn(acc[m][pi][3], f1, __fmul_rn(acc[m][pi][2], f0));
        vg = __fadd_rn(vg, __shfl_xor_sync(0xFFFFFFFFu, vg, 1));
        v8 = __fadd_rn(v8, __shfl_xor_sync(0xFFFFFFFFu, v8, 1));
        vg = __fadd_rn(vg, __shfl_xor_sync(0xFFFFFFFFu, vg, 2));
        v8 = __fadd_rn(v8, __shfl_xor_sync(0xFFFFFFFFu, v8, 2));
        if (t == 0) rd[((warp * NM + m) * PT + pi) * 16 + g] = vg, rd[((warp * NM + m) * PT + pi) * 16 + g + 8] = v8;
        acc[m][pi][0] = acc[m][pi][1] = acc[m][pi][2] = acc[m][pi][3] = 0.0f;
      }
    __syncthreads();
    const int row = tid & 15, pi = tid >> 4, r0 = (gt0 + gi) * 16;
    if (pi < qn && r0 + row < rows) {
      float s[NM];
#pragma unroll
      for (int m = 0; m < NM; ++m) {
        s[m] = 0.0f;
        for (int w = 0; w < NW; ++w)
          if ((w + 1) * nst / NW > w * nst / NW) s[m] = __fadd_rn(s[m], rd[((w * NM + m) * PT + pi) * 16 + row]);
      }
      y[(long long)sq[pi] * rows + r0 + row] = NM == 2 ? swiglu_f(s[0], s[NM - 1], L) : s[0];
    }
  }
}

// moe_gateup_fp4_p<PT>_m and moe_down_fp4_p<PT>_m: moem_body's gate/up
// (16 rows of W1 and of W3 a row tile, SwiGLU fused) and down (16 rows of
// W2) products for the pairs p0 .. p0 + PT - 1 of each tile; rings of 4
// stages; FP4 rows of a multiple of 128 columns.
#define MOEM_ENTRY(PT, S, MINB)                                                                                  \
  extern "C" __global__ void __launch_bounds__(256, MINB)                                                       \
      moe_gateup_fp4_p##PT##_m(float* h, const float* x, int xDiv, const int* order, const int* idx,            \
                               const int* chunks, const u64* tab1, const u64* tab3, int rows, int cols, float L, \
                               int G, int p0) {                                                                 \
    PDL_WAIT();                                                                                                 \
    moem_body<2, PT, S>(h, x, xDiv, order, idx, chunks, tab1, tab3, rows, cols, L, G, p0);                        \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(256, MINB)                                                       \
      moe_down_fp4_p##PT##_m(float* y, const float* x, int xDiv, const int* order, const int* idx,              \
                             const int* chunks, const u64* tab2, const u64* unused, int rows, int cols, float L, \
                             int G, int p0) {                                                                   \
    PDL_WAIT();                                                                                                 \
    moem_body<1, PT, S>(y, x, xDiv, order, idx, chunks, tab2, unused, rows, cols, L, G, p0);                      \
  }
MOEM_ENTRY(1, 4, 2)
MOEM_ENTRY(2, 4, 1)
MOEM_ENTRY(4, 4, 1)
