// moem.cu (Backend.moeM, off by default: measured slower than moeq, see
// below): Fast mode's FP4 experts for tiles of 1, 2 and 4 pairs on the
// FP8 tensor cores (wgmma m64n8k32 e4m3, sm_90): the
// products moeq (moe.cu) computes on dp4a, with the integer work moved to
// the tensor cores.
//
// Why: moeq spends ~4.6 instructions a weight, about half of them on the
// ALU pipe (table lookups, dp4a), and runs issue-bound at ~2.2 TB/s (run
// 14's ncu). Here a code becomes an e4m3 byte by placement alone: e2m1's
// sign at bit 7 and its exponent and mantissa bits at bits 4..2 give
// e2m1·2^-6 exactly (subnormal codes included), four codes of a word in
// 3-4 instructions (moem_even, moem_odd); one wgmma multiplies 64 rows of
// 32 codes (one scale block) by the activations' digits: about 1.6
// instructions a weight.
//
// Numerics (moeq's): each 32-column block of a pair's activations is
// scaled by 2^(21-e) (e: the exponent of its largest magnitude) and rounded
// to the integer x_int (|x_int| <= 2^22): x is carried to 2^-22 of its
// block's largest value. x_int is split into six balanced base-16 digits
// d_0..d_5 (d_k in [-8, 8), d_5 in [-5, 5]), each exactly an e4m3 byte;
// digit k is column k of wgmma's B (columns 6 and 7 zero). Each product
// of a code and a digit is exact and the 32 of a column sum to an integer
// multiple of 2^-7 under 2^5 (at most 12 significant bits), exact in the
// mma's float32 sum. That sum C_k, times the row's scale and the block's
// factor 2^(e-15) (one float32 multiply and one fused multiply-add), is
// added to the row's float32 accumulator of digit k; at the row's end the
// digits are combined as Σ_k 16^k·acc_k (lane t holds k = 2t, 2t+1: one
// fused multiply-add, then two shuffles over the lanes). A block holding a
// NaN or an infinity contributes NaN; one of magnitudes under 2^-100, 0.
//
// Order: every output is the sum over the two column slices (in order)
// of each slice's blocks (in column order) per digit, then the digits as
// above: it depends on the matrix's shape only, never on the tile's size,
// the other pairs, G or the batch (batch-invariant among the batches that
// take it). Other bits than moeq's.
//
// Block (x, y): row tiles [x·G, (x+1)·G) (64 rows each; of W1 and W3 both
// with NM = 2, SwiGLU fused) of tile y's expert for the tile's pairs
// p0 .. p0+PT-1 (the host launches tiles of 8 pairs as two halves).
// Warpgroup s (warps 4s .. 4s+3) takes column slice s: the steps s, s + 2,
// ... of a row tile's cols/128 steps of MOEM_BS blocks; its warp q the
// rows 16q .. 16q+15 of the tile (wgmma's A rows). Lane (g, c) = (lane/4,
// lane%4) reads word c of rows g and g + 8 of each block (the A fragment:
// columns 8c + 2i as k = 4c + i and 8c + 2i + 1 as k = 16 + 4c + i), and
// B holds the digits at the same columns. Dynamic shared memory (moemShared
// in moeops.go): the weights' ring (S stages of a warp's NM·16·MOEM_BS
// 16-byte chunks, [m][block][row], so that a warp's 32 lanes read 32
// consecutive words), the scale words' ring (4 blocks' bytes of a row a
// word), the pairs' B (64 words a block) and factors, then the slices'
// partial sums (two buffers).
//
// Measured (run 20, H200, batch-1 step of the 4-layer Flash checkpoint;
// Backend.moeM, off by default): the first form (mma.sync m16n8k32 e4m3,
// 16-row tiles, 8 column slices) took 44 us a gate/up against moeq's 26,
// since Hopper runs that instruction as float16 conversions and mmas. This
// form (wgmma) takes 47 us (down 26.5 against 17): ncu 13.6M warp
// instructions (moeq 14.5M: the decode is cheap, but the scales, the
// zeroed sums and the float32 fused multiply-adds a block and row cost
// what dp4a's chains did), issue slots 30% busy, DRAM 25%, achieved
// occupancy 18% (192 blocks of 64 rows for 264 slots, 0.73 waves), long
// scoreboard and MIO stalls: each step waits for its wgmmas before the
// next decode. A faster form needs more row tiles in flight (fewer, wider
// column slices; wgmma's wait overlapped with the next step's decode).

#define MOEM_BS 4
#define MOEM_ROUNDS 4

// moem_even places the codes of w's low nibbles (columns 0, 2, 4, 6 of the
// word) as e4m3 bytes of e2m1·2^-6; moem_odd those of the high nibbles.
__device__ __forceinline__ u32 moem_even(u32 w) { return ((w << 2) & 0x1C1C1C1Cu) | ((w << 4) & 0x80808080u); }
__device__ __forceinline__ u32 moem_odd(u32 w) { return ((w >> 2) & 0x1C1C1C1Cu) | (w & 0x80808080u); }

// wgmma_e4m3 is D = A·B for one m64n8k32 tile of e4m3 operands on the
// warpgroup of the calling warp (wgmma.mma_async, A from registers, B from
// shared memory at b: 256 bytes, two 8x16-byte core matrices, k 0-15 then
// k 16-31, row n of each at 16n), float32 out, D's input ignored: warp w
// of the warpgroup gives A rows 16w + l/4 and 16w + l/4 + 8 of lane l
// (mma.sync m16n8k32's fragment: columns 4(l%4) + {0..3} and 16 + 4(l%4) +
// {0..3}) and gets those rows of D (columns 2(l%4) + {0, 1}). The caller
// fences before (wgmma_fence: after writing A or D), commits and waits
// before reading D (wgmma_wait), every warp of the warpgroup at once.
// Hopper runs e4m3 mma.sync (sm_89's form) as float16 conversions and
// float16 mmas, about 12 more instructions a tile: wgmma is its FP8
// tensor-core path. The emulator gathers the warp's fragments through
// shuffles and adds the exact products in float64, rounded once: what the
// hardware gives for moem's sums, which are exact in float32.
#ifdef STRATA_EMU
__device__ __forceinline__ void wgmma_e4m3(float* d, const u32* a, const u8* b) {
  const int lane = threadIdx.x & 31;
  float A[16][32];
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, t = l & 3;
    u32 ar[4];
    for (int i = 0; i < 4; ++i) ar[i] = __shfl_sync(0xFFFFFFFFu, a[i], l);
    for (int i = 0; i < 4; ++i) {
      A[g][4 * t + i] = e4m3(ar[0] >> (8 * i));
      A[g + 8][4 * t + i] = e4m3(ar[1] >> (8 * i));
      A[g][16 + 4 * t + i] = e4m3(ar[2] >> (8 * i));
      A[g + 8][16 + 4 * t + i] = e4m3(ar[3] >> (8 * i));
    }
  }
  const int g = lane >> 2, t = lane & 3;
  for (int e = 0; e < 4; ++e) {
    const int r = g + (e >> 1) * 8, c = 2 * t + (e & 1);
    double acc = 0.0;
    for (int k = 0; k < 32; ++k) acc += (double)A[r][k] * (double)e4m3(b[(k >> 4) * 128 + c * 16 + (k & 15)]);
    d[e] = (float)acc;
  }
}
__device__ __forceinline__ void wgmma_fence() {}
__device__ __forceinline__ void wgmma_commit() {}
__device__ __forceinline__ void wgmma_wait() {}
__device__ __forceinline__ void wgmma_hold(float&) {}
__device__ __forceinline__ void wgmma_smem_visible() {}
#else
__device__ __forceinline__ void wgmma_e4m3(float* d, const u32* a, const u8* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The matrix descriptor: start address / 16, both byte offsets 128 / 16
  // (the second core matrix along k; there is one along n), no swizzle.
  const u64 desc = (u64)((((u32)__cvta_generic_to_shared(b)) & 0x3FFFFu) >> 4) | ((u64)8 << 16) | ((u64)8 << 32);
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc)
      : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}
// wgmma_smem_visible makes this thread's shared-memory stores visible to
// the async proxy that wgmma reads B through (before the barrier that
// orders them for the other threads).
__device__ __forceinline__ void wgmma_smem_visible() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// wgmma_hold ties v to this point of the program (after wgmma_wait), so
// that no read of a D register moves above the wait.
__device__ __forceinline__ void wgmma_hold(float& v) { asm volatile("" : "+f"(v)::"memory"); }
#endif

// wgmma_probe runs one wgmma_e4m3 on warpgroup 0: A (64x32 bytes,
// row-major, one code a byte) and B (8 columns of 32 bytes) from global
// memory, D (64x8 floats) out; for TestWGMMAProbe, which checks the
// fragment and descriptor layouts against the emulator's.
extern "C" __global__ void __launch_bounds__(128) wgmma_probe(float* D, const u8* A, const u8* B) { PDL_WAIT();
  __shared__ __align__(128) u8 sb[256];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    const int k = ((i >> 7) << 4) + (i & 15), n = (i >> 4) & 7;
    sb[i] = B[n * 32 + k];
  }
  wgmma_smem_visible();
  __syncthreads();
  u32 a[4];
  const u8* r0 = A + (16 * w + g) * 32;
  const u8* r8 = r0 + 8 * 32;
  a[0] = *(const u32*)(r0 + 4 * t), a[1] = *(const u32*)(r8 + 4 * t);
  a[2] = *(const u32*)(r0 + 16 + 4 * t), a[3] = *(const u32*)(r8 + 16 + 4 * t);
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  wgmma_fence();
  wgmma_e4m3(d, a, sb);
  wgmma_commit();
  wgmma_wait();
  for (int e = 0; e < 4; ++e) {
    wgmma_hold(d[e]);
    D[(16 * w + g + (e >> 1) * 8) * 8 + 2 * t + (e & 1)] = d[e];
  }
}

// moem_copy16 is ring_copy16 with the L2 told to fetch the 256 bytes
// around src: a warp's step takes 64 bytes of each of its rows, the next
// step (of this warp and of the other column slice's, a step apart) the
// bytes after them.
__device__ __forceinline__ void moem_copy16(uint4* dst, const void* src) {
#ifdef STRATA_EMU
  ring_copy16(dst, src);
#else
  const u32 d = (u32)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
#endif
}

// moem_digit returns the e4m3 byte of the integer d, |d| <= 8.
__device__ __forceinline__ u32 moem_digit(int d) {
  const u32 a = (u32)(d < 0 ? -d : d);
  const u32 m = a >= 8 ? 0x50u : (u32)((0x4E4C4A4844403800ull >> (8 * a)) & 0xFFu);
  return d < 0 ? m | 0x80u : m;
}

// moem_stage writes one pair's activations (xr, cols floats, cols a
// multiple of 32) as wgmma_e4m3's B, 64 words a 32-column block b: word
// b·64 + 4k + c (the first core matrix: logical columns 4c + i) holds digit
// k of the block's columns 8c + 2i (byte i), word b·64 + 32 + 4k + c (the
// second: 16 + 4c + i) those of columns 8c + 2i + 1, digits 6 and 7 zero;
// xf[b] the block's factor 2^(e-15) (NaN for a block holding a NaN or an
// infinity). Each thread takes 4 columns a round, 8 consecutive lanes a
// block (their largest magnitude by shuffles, as moeq_stage); every thread
// of the block calls it, and the caller syncs.
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
      int xi[4], e;
      bool fin;
      moe_block_quant(f[u], xi, e, fin);
      int dg[4][8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        int r = xi[i];
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
        for (int k = 0; k < 8; ++k) {
          // Columns 4j + {0, 2} are the even columns 8c + 2(2h + {0, 1}):
          // bytes 2h, 2h + 1 of the first core matrix's word; 4j + {1, 3}
          // those of the second's.
          u16* w0 = (u16*)(xb + b * 64 + 4 * k + c);
          u16* w1 = (u16*)(xb + b * 64 + 32 + 4 * k + c);
          w0[h] = k < 6 ? (u16)(moem_digit(dg[0][k]) | (moem_digit(dg[2][k]) << 8)) : (u16)0;
          w1[h] = k < 6 ? (u16)(moem_digit(dg[1][k]) | (moem_digit(dg[3][k]) << 8)) : (u16)0;
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
  enum { NW = 8, BS = MOEM_BS, CH = NM * 16 * MOEM_BS, CPL = CH / 32, NSW = NM * 16, KS = 2 };
  const int nblk = cols / 32;
  DYN_SHARED(uint4, ring);                      // [S][NW][CH] 16-byte chunks
  u32* sring = (u32*)(ring + S * NW * CH);      // [S][NW][NSW] scale words
  u32* xb = sring + S * NW * NSW;               // [PT][nblk][64] B
  float* xf = (float*)(xb + PT * nblk * 64);    // [PT][nblk] factors
  float* red = xf + PT * nblk;                  // [2][KS][NM][PT][64] partial sums
  __shared__ int sq[PT];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int wg = warp >> 2, wq = warp & 3;  // the warpgroup (column slice) and the warp's 16 rows of 64
  const int q0 = chunks[2 * blockIdx.y] + p0, qn = min(chunks[2 * blockIdx.y + 1] - p0, (int)PT);
  if (qn <= 0) return;
  if (tid < PT) sq[tid] = order[q0 + min(tid, qn - 1)];
  __syncthreads();
  const int gt0 = blockIdx.x * G, ng = min(G, (rows + 63) / 64 - gt0);
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
  // The warpgroup's column slice: steps wg, wg + KS, ... of a row tile's
  // nst (the two slices' warps read neighbouring bytes of the same rows at
  // about the same time).
  const int nst = nblk / BS, nsw = (nst - wg + KS - 1) / KS;

  // issue queues step (ig, ij)'s copies (the warp's 16 rows of each matrix
  // at its slice's step ij, and their scale words) into stage st and
  // commits them; an empty group past the warp's last step.
  int ig = 0, ij = 0;
  auto issue = [&](int st) {
    if (ig < ng && nsw > 0) {
      const int r0 = (gt0 + ig) * 64 + wq * 16;
      const u32 b0 = (u32)(wg + KS * ij) * BS;
      uint4* dst = ring + (st * NW + warp) * CH;
#pragma unroll
      for (int i = 0; i < CPL; ++i) {
        const int q = lane + 32 * i, row = q & 15, blk = (q >> 4) % BS, m = q / (16 * BS);
        const u32 r = (u32)min(r0 + row, rows - 1);
        moem_copy16(dst + q, wm[m] + r * rowBytes + (b0 + blk) * 16u);
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
    moem_stage(xb + pi * nblk * 64, xf + pi * nblk, x + (long long)(sq[pi] / xDiv) * cols, cols);
  wgmma_smem_visible();
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
      u32 a[BS][NM][4];
      float sw[BS][NM][2];
#pragma unroll
      for (int m = 0; m < NM; ++m) {
        const u32 sg = sst[m * 16 + g], s8 = sst[m * 16 + g + 8];
#pragma unroll
        for (int blk = 0; blk < BS; ++blk) {
          const u32 w0 = wst[((m * BS + blk) * 16 + g) * 4 + t], w1 = wst[((m * BS + blk) * 16 + g + 8) * 4 + t];
          a[blk][m][0] = moem_even(w0), a[blk][m][1] = moem_even(w1);
          a[blk][m][2] = moem_odd(w0), a[blk][m][3] = moem_odd(w1);
          sw[blk][m][0] = ue8m0((sg >> (8 * blk)) & 0xFFu);
          sw[blk][m][1] = ue8m0((s8 >> (8 * blk)) & 0xFFu);
        }
      }
      const int kb0 = (wg + KS * j) * BS;
#pragma unroll
      for (int pi = 0; pi < PT; ++pi) {
        if (pi < qn) {
          float c[BS][NM][4];
#pragma unroll
          for (int blk = 0; blk < BS; ++blk)
#pragma unroll
            for (int m = 0; m < NM; ++m) c[blk][m][0] = c[blk][m][1] = c[blk][m][2] = c[blk][m][3] = 0.0f;
          wgmma_fence();
#pragma unroll
          for (int blk = 0; blk < BS; ++blk)
#pragma unroll
            for (int m = 0; m < NM; ++m) wgmma_e4m3(c[blk][m], a[blk][m], (const u8*)(xb + (pi * nblk + kb0 + blk) * 64));
          wgmma_commit();
          wgmma_wait();
#pragma unroll
          for (int blk = 0; blk < BS; ++blk) {
            const float sx = xf[pi * nblk + kb0 + blk];
#pragma unroll
            for (int m = 0; m < NM; ++m) {
#pragma unroll
              for (int q = 0; q < 4; ++q) wgmma_hold(c[blk][m][q]);
              const float mg = __fmul_rn(sw[blk][m][0], sx), mg8 = __fmul_rn(sw[blk][m][1], sx);
              acc[m][pi][0] = __fmaf_rn(c[blk][m][0], mg, acc[m][pi][0]);
              acc[m][pi][1] = __fmaf_rn(c[blk][m][1], mg, acc[m][pi][1]);
              acc[m][pi][2] = __fmaf_rn(c[blk][m][2], mg8, acc[m][pi][2]);
              acc[m][pi][3] = __fmaf_rn(c[blk][m][3], mg8, acc[m][pi][3]);
            }
          }
        }
      }
      st = st == S - 1 ? 0 : st + 1;
    }
    // The row tile's end: each warp's 16 rows of its slice, digits
    // combined, into red; then 64·PT threads sum the slices in order.
    float* rd = red + (gi & 1) * KS * NM * PT * 64;
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
        float* rp = rd + ((wg * NM + m) * PT + pi) * 64 + wq * 16;
        if (t == 0) rp[g] = vg, rp[g + 8] = v8;
        acc[m][pi][0] = acc[m][pi][1] = acc[m][pi][2] = acc[m][pi][3] = 0.0f;
      }
    __syncthreads();
    const int row = tid & 63, pi = tid >> 6, r0 = (gt0 + gi) * 64;
    if (pi < qn && r0 + row < rows) {
      float s[NM];
#pragma unroll
      for (int m = 0; m < NM; ++m) {
        s[m] = 0.0f;
        for (int k = 0; k < KS; ++k)
          if (k < nst) s[m] = __fadd_rn(s[m], rd[((k * NM + m) * PT + pi) * 64 + row]);
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
MOEM_ENTRY(2, 4, 2)
MOEM_ENTRY(4, 4, 1)
