// gemvh.cu: the Fast product of FP8 weights for one token on the float16
// tensor cores, y = W·x, in gemvp's persistent ring.
//
// Why: gemvp (float32, gemv2's bits) spends about 5.5 instructions a
// weight (decode, widen, FMA, the activations' loads), and at one token
// that, not HBM, sets its time (run 15: 273 us a batch-1 step for 121 us
// of bytes). gemvx put one token on the tensor cores before and lost
// (run 10): it decoded the bytes as bfloat16 in 5 instructions a pair,
// split the activations again at every step, and ran two mmas (hi, lo)
// for one useful column. Here the hardware decodes a pair of e4m3 bytes
// to float16 in one instruction (cvt.rn.f16x2.e4m3x2, exact: every e4m3
// value is a float16), the activations are split once a block, and hi and
// lo are two columns of one mma: about 0.6 instructions a weight.
//
// Numerics (Fast mode): each 128-column block b of x is scaled by 2^f_b
// (f_b = 14 - the exponent of its largest |x|, so that the scaled values
// are below 2^15) and split as hi = f16(x·2^f_b), lo = f16(x·2^f_b - hi)
// (round to nearest even): hi + lo is x·2^f_b to 2^-22 relative, or 2^-25
// absolute where lo is a float16 subnormal (2^-40 of the block's largest
// |x|). mma.sync m16n8k16 (f16 in, f32 accumulate) multiplies 16 rows by
// the columns (hi, lo, 0, ..., 0) over the block's 128 columns in 8 steps;
// then y_r += ((D_r,hi + D_r,lo) · 2^-f_b) · scale(r, b) in float32 (each
// of D's columns the sum of two chains of 4 steps). The
// order of every sum depends on the shape alone (the split, below), not on
// the grid.
//
// Work: a unit is 8/SPLIT tiles of 16 rows; warp w of a block takes tile
// w / SPLIT and the column blocks p, p + SPLIT, ... (p = w % SPLIT), one
// a step; the SPLIT warps of a tile add their sums in warp order. Lane
// (g, c) = (lane/4, lane%4) copies the bytes [16c, 16c + 16) and [64 +
// 16c, 64 + 16c + 16) of the block of rows g and g + 8 into its ring
// slots, S - 1 steps ahead, and feeds mma step j (j = 0..7) with their
// word j: mma columns (2c, 2c+1, 2c+8, 2c+9) are 4 consecutive columns of
// the block, the same permutation for the weights and the activations.
// Each step's 8 mmas run as two chains of 4 (even and odd j) added at
// the end. Lanes g = 0 and 1 read hi and lo of those columns (8 float16s
// for two steps a 16-byte load), the other lanes a zero unit; the eight
// 16-byte loads of a quarter warp hit eight different bank groups
// (gvh_unit).
//
// Entries: gemvh_fp8_s<S>_p<SPLIT> and their _g form (groups from a
// table, as gemvp's): S ring stages (3 or 4), SPLIT 1, 2, 4, 8. Dynamic
// shared memory: the ring, S · 4 · 256 · 16 bytes, then the activations,
// (K/128 · 33 + 1) · 16 bytes, then K/128 floats of 2^-f_b (gemvhShared in
// gemvh.go).

#define GVH_NT 256

// gvh_unit is the 16-byte unit (of a 128-column block's 16) that holds
// the columns of lane c's mma steps 2i and 2i + 1 (i = 0..3): the lane's
// columns are [16c, 16c + 16) and [64 + 16c, 64 + 16c + 16), so that the 4
// lanes of a row copy 64 contiguous bytes (whole 32-byte sectors) an
// instruction. For a load i the 4 c of hi fall in 4 bank groups of
// one parity, and lo's, 17 units further, in the other 4.
__device__ __forceinline__ int gvh_unit(int c, int i) { return 8 * (i >> 1) + 2 * c + (i & 1); }

// e4m3x2_f16 decodes the e4m3 bytes 2h and 2h+1 of w into a float16 pair
// (byte 2h low): exact, NaN codes to NaN.
__device__ __forceinline__ u32 e4m3x2_f16(u32 w, int h) {
#ifdef STRATA_EMU
  const u32 b = w >> (16 * h);
  return f16_rn_soft(e4m3(b & 0xFFu)) | (f16_rn_soft(e4m3((b >> 8) & 0xFFu)) << 16);
#else
  u32 r;
  if (h)
    asm("{\n.reg .b16 a, b;\nmov.b32 {a, b}, %1;\ncvt.rn.f16x2.e4m3x2 %0, b;\n}" : "=r"(r) : "r"(w));
  else
    asm("{\n.reg .b16 a, b;\nmov.b32 {a, b}, %1;\ncvt.rn.f16x2.e4m3x2 %0, a;\n}" : "=r"(r) : "r"(w));
  return r;
#endif
}

template <int SPLIT, int S>
__device__ __forceinline__ void gemvh_rows(float* __restrict__ y0, int ygs, const float* __restrict__ x0, int xgs,
                                           const u8* __restrict__ w0, const u8* __restrict__ s0,
                                           const u64* __restrict__ tab, int units, int groups, int rows, int K,
                                           int rs, int cs, int scaleCols) {
  const int G = 8 / SPLIT, NT = GVH_NT;
  DYN_SHARED(uint4, ring);               // [S][4][NT]
  uint4* xs = ring + S * 4 * NT;         // [K/128][33] units, then one zero unit
  const int nkb = K >> 7;
  float* xsc = (float*)(xs + nkb * 33 + 1);  // [K/128]: 2^-f_b
  __shared__ float red[8][16];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int grp = warp / SPLIT, part = warp % SPLIT;
  const int steps = (nkb + SPLIT - 1) / SPLIT;
  const int total = units * groups;
  const int mine = (int)blockIdx.x < total ? (total - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
  auto slot = [&](int st, int i) -> uint4* { return ring + ((st * 4 + i) * NT + tid); };
  auto matrix = [&](int gi) -> const u8* { return tab ? (const u8*)tab[2 * gi] : w0; };

  // issue queues the copies of the task at cursor cu into stage st and
  // commits them (an empty group past the last task or block, so that
  // every step waits alike).
  auto issue = [&](const gemvp_cursor& cu, int st) {
    const int kb = part + cu.step * SPLIT;
    if (cu.i < mine && kb < nkb) {
      const u8* w = matrix(cu.g);
      const int r0 = (cu.b * G + grp) * 16;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const u8* src = w + (long long)min(r0 + g + 8 * h, rows - 1) * K + (kb << 7) + 16 * c;
        ring_copy16(slot(st, 2 * h), src);
        ring_copy16(slot(st, 2 * h + 1), src + 64);
      }
    }
    ring_commit();
  };

  gemvp_cursor in = {0, 0, (int)blockIdx.x, 0};
  while (in.b >= units) {
    in.b -= units;
    ++in.g;
  }
  gemvp_cursor at = in;
  // The first stages copy weights only: before PDL_WAIT_LATE, in flight
  // while the kernel before this one finishes (common.cuh).
#pragma unroll
  for (int st = 0; st < S - 1; ++st) {
    issue(in, st);
    gemvp_next(in, steps, units);
  }
  PDL_WAIT_LATE();

  // stage_x scales and splits group gi's input into xs (the caller syncs):
  // warp w the blocks w, w + 8, ..., lane l its columns 4l..4l+3. Eight
  // blocks' loads go out before any is used (their latency once, not
  // once a block).
  auto stage_x = [&](int gi) {
    const float* src = x0 + (long long)gi * xgs;
    float4 zero;
    zero.x = zero.y = zero.z = zero.w = 0.0f;
    for (int k0 = warp; k0 < nkb; k0 += 64) {
      float4 v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int kb = k0 + 8 * u;
        v[u] = kb < nkb ? __ldg((const float4*)(src + (kb << 7)) + lane) : zero;
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int kb = k0 + 8 * u;
        if (kb >= nkb) break;  // the same for the whole warp
        u32 m = max(max(__float_as_uint(v[u].x) & 0x7FFFFFFFu, __float_as_uint(v[u].y) & 0x7FFFFFFFu),
                    max(__float_as_uint(v[u].z) & 0x7FFFFFFFu, __float_as_uint(v[u].w) & 0x7FFFFFFFu));
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) m = max(m, (u32)__shfl_xor_sync(0xFFFFFFFFu, (int)m, o));
        // 2^fe, fe = 14 - e (e: the binary exponent of the largest |x|;
        // NaN and infinity give e = 128 and stay what they are), within
        // [-126, 126]: exact scalings both ways.
        const int fe = min(126, max(-126, 14 - ((int)(m >> 23) - 127)));
        const float f = __uint_as_float((u32)(fe + 127) << 23);
        const float a0 = __fmul_rn(v[u].x, f), a1 = __fmul_rn(v[u].y, f), a2 = __fmul_rn(v[u].z, f),
                    a3 = __fmul_rn(v[u].w, f);
        const u32 h0 = f16x2_rn(a0, a1), h1 = f16x2_rn(a2, a3);
        const u32 l0 = f16x2_rn(__fsub_rn(a0, f16_lo(h0)), __fsub_rn(a1, f16_hi(h0)));
        const u32 l1 = f16x2_rn(__fsub_rn(a2, f16_lo(h1)), __fsub_rn(a3, f16_hi(h1)));
        // Lane l's 4 columns are half (l & 1) of unit l / 2.
        u32* hp = (u32*)(xs + kb * 33 + (lane >> 1)) + 2 * (lane & 1);
        u32* lp = hp + 17 * 4;
        hp[0] = h0;
        hp[1] = h1;
        lp[0] = l0;
        lp[1] = l1;
        if (lane == 0) xsc[kb] = __uint_as_float((u32)(127 - fe) << 23);
      }
    }
  };
  int staged = at.g;
  if (tid < 4) ((u32*)(xs + nkb * 33))[tid] = 0u;
  if (mine > 0) stage_x(staged);
  __syncthreads();

  // This lane's x units: hi (g = 0) or lo (g = 1) of the block, at
  // gvh_unit's places; the zero unit for the others.
  const int xb = g == 0 ? 0 : (g == 1 ? 17 : -1);
  int xoff[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) xoff[i] = xb < 0 ? 0 : xb + gvh_unit(c, i);
  const uint4* zero = xs + nkb * 33;

  // scale_at loads the scale byte of the task at cursor cu (0 past the
  // last task or block): a step ahead of its use, its latency behind a
  // step's mmas.
  auto scale_at = [&](const gemvp_cursor& cu) -> u32 {
    const int kb = part + cu.step * SPLIT;
    if (cu.i >= mine || kb >= nkb) return 0u;
    const u8* sc = tab ? (const u8*)tab[2 * cu.g + 1] : s0;
    const int r0 = (cu.b * G + grp) * 16;
    return __ldg(sc + (long long)(min(r0, rows - 1) >> rs) * scaleCols + ((kb << 3) >> cs));
  };
  u32 sraw = scale_at(at);
  float acc0 = 0.0f, acc1 = 0.0f;
  for (int st = 0; at.i < mine;) {
    // This task's group has landed (S - 2 younger ones may be pending);
    // the stage issued now was last read at the task before, by this
    // thread.
    ring_wait<S - 2>();
    issue(in, st == 0 ? S - 1 : st - 1);
    gemvp_next(in, steps, units);
    const int r0 = (at.b * G + grp) * 16;
    if (at.step == 0) {
      if (at.g != staged && xgs != 0) {  // the same for every thread
        __syncthreads();
        stage_x(at.g);
        __syncthreads();
      }
      staged = at.g;
      acc0 = acc1 = 0.0f;
    }
    gemvp_cursor nx = at;
    gemvp_next(nx, steps, units);
    const u32 snext = scale_at(nx);
    const int kb = part + at.step * SPLIT;
    if (kb < nkb) {
      uint4 q[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) q[i] = *slot(st, i);
      const uint4* xp = xb < 0 ? zero : xs + kb * 33;
      uint4 xv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) xv[i] = xp[xoff[i]];
      // Two chains of 4 mmas (even and odd steps), for their latency.
      float d[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const u32 wg = word_of(q[j >> 2], j & 3), w8 = word_of(q[2 + (j >> 2)], j & 3);
        const u32 a[4] = {e4m3x2_f16(wg, 0), e4m3x2_f16(w8, 0), e4m3x2_f16(wg, 1), e4m3x2_f16(w8, 1)};
        const u32 b[2] = {word_of(xv[j >> 1], 2 * (j & 1)), word_of(xv[j >> 1], 2 * (j & 1) + 1)};
        mma_f16(d[j & 1], a, b);
      }
      // Lanes c = 0 hold columns hi and lo of rows g and g + 8 (the
      // others' columns are 0).
      const float sx = xsc[kb], sw = ue8m0(sraw);
      const float r0s = __fadd_rn(__fadd_rn(d[0][0], d[1][0]), __fadd_rn(d[0][1], d[1][1]));
      const float r8s = __fadd_rn(__fadd_rn(d[0][2], d[1][2]), __fadd_rn(d[0][3], d[1][3]));
      acc0 = __fmaf_rn(__fmul_rn(r0s, sx), sw, acc0);
      acc1 = __fmaf_rn(__fmul_rn(r8s, sx), sw, acc1);
    }
    sraw = snext;
    if (at.step == steps - 1) {
      float* y = y0 + (long long)at.g * ygs;
      if (SPLIT == 1) {
        if (c == 0) {
          if (r0 + g < rows) y[r0 + g] = acc0;
          if (r0 + g + 8 < rows) y[r0 + g + 8] = acc1;
        }
      } else {
        if (c == 0) {
          red[warp][g] = acc0;
          red[warp][g + 8] = acc1;
        }
        __syncthreads();
        if (part == 0 && lane < 16) {
          float s = red[warp][lane];
#pragma unroll
          for (int p = 1; p < SPLIT; ++p) s = __fadd_rn(s, red[warp + p][lane]);
          if (r0 + lane < rows) y[r0 + lane] = s;
        }
        __syncthreads();
      }
    }
    gemvp_next(at, steps, units);
    st = st == S - 1 ? 0 : st + 1;
  }
}

#define GEMVH_ENTRY(S, SPLIT)                                                                                        \
  extern "C" __global__ void __launch_bounds__(GVH_NT, 2)                                                           \
      gemvh_fp8_s##S##_p##SPLIT(float* __restrict__ y, const float* __restrict__ x, const u8* __restrict__ w,        \
                                const u8* __restrict__ sc, int units, int rows, int K, int rs, int cs,             \
                                int scaleCols) {                                                                   \
    PDL_OPEN_EARLY();                                                                                                \
    gemvh_rows<SPLIT, S>(y, 0, x, 0, w, sc, 0, units, 1, rows, K, rs, cs, scaleCols);                                \
  }                                                                                                                  \
  extern "C" __global__ void __launch_bounds__(GVH_NT, 2)                                                           \
      gemvh_fp8_s##S##_p##SPLIT##_g(float* __restrict__ y, int ygs, const float* __restrict__ x, int xgs,            \
                                    const u64* __restrict__ tab, int units, int groups, int rows, int K, int rs,    \
                                    int cs, int scaleCols) {                                                       \
    PDL_OPEN_EARLY();                                                                                                \
    gemvh_rows<SPLIT, S>(y, ygs, x, xgs, 0, 0, tab, units, groups, rows, K, rs, cs, scaleCols);                      \
  }
#define GEMVH_SPLITS(S) \
  GEMVH_ENTRY(S, 1)     \
  GEMVH_ENTRY(S, 2)     \
  GEMVH_ENTRY(S, 4)     \
  GEMVH_ENTRY(S, 8)
GEMVH_SPLITS(3)
GEMVH_SPLITS(4)
