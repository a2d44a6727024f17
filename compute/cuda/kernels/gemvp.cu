// gemvp.cu: gemv2's T = 1 product with its weight loads pipelined: the
// same bits as gemv2's entry of the same split, in less time where gemv2
// waits on memory.
//
// Why: a gemv2 warp loads its chunks, waits for them, then decodes and
// multiplies them, and only then loads the next ones. A matrix of one
// wave of blocks (wo_b: 256 blocks, 4 such steps a lane) has every warp
// of the GPU in the same phase at once, so HBM idles while the SMs
// compute, and the SMs idle while HBM streams (run 10: 32 MB of FP8 in
// 16.9 us, 1.9 TB/s of 4.3; the compute phase alone is about a third of
// a step by SASS count).
//
// How: each thread copies its own chunks into its own slots of a ring of
// S stages in shared memory (cp.async, no registers held by a load in
// flight), S - 1 steps ahead of the step it computes;
// a thread reads only what it copied, so no barrier orders the ring. The
// blocks are persistent: block b computes gemv2's blocks b, b + grid, ...
// and its ring runs across their boundaries, so products of many short
// blocks (wq_b: 2048 blocks of one step) keep their loads in flight too.
//
// The activations are staged in shared memory too, once a block (again
// when a grouped product's unit moves to the next group's input), each
// chunk's 16 floats padded to 20: a lane reads its chunk's floats 80
// bytes from the next lane's, 8 lanes of a quarter warp in 8 different
// bank groups (as moe.cu's _sx kernels). gemv2 reads them through L1 64
// bytes apart, 2 lanes a 128-byte line: 16 wavefronts a 16-byte load, 64
// for each KB of weights of 2 rows, against 8 for the weights themselves.
//
// Order: lane l of part p of row group g reads the same chunks as gemv2
// (c = part·32 + l + j·32·SPLIT, j = 0, 1, ...) in the same order, each
// chunk's products first, then times its scale; the butterfly and the
// parts as gemv2: every output has gemv2's bits (TestGEMVP). FP8 codes
// are decoded by the hardware (e4m3x4_hw: the values of e4m3 with NaN for
// the NaN codes, so the NaN check of gemv2's chunk scale is not needed).
//
// Entries: gemvp_<fmt>_u<U>s<S>_s<SPLIT> (y = W·x, T = 1; U = 2 with S =
// 4 or 3 stages) and its _g form (gemv2's grouped product:
// group g = unit / units of the matrix tab[g]). Grid: at most the units
// (gemv2's blocks) times groups; the host sizes it to the blocks the GPU
// holds at once (2 an SM). Dynamic shared memory: the ring, S · U ·
// GEMVP_ROWS · 256 · 16 bytes (64 and 48 KB), then the activations,
// K / PER · XP floats (gemvpShared in gemvp.go).

#define GEMVP_ROWS 2

// What gemvp_rows waits on between queuing its first weight stages and
// staging its input: the kernel before it (PDL_WAIT_LATE), or an earlier
// phase of its own launch (gemvp_chain: *done, the units that phase
// finished, reaching need; the input is then read through L2, as another
// block of the launch wrote it).
#define GEMVP_WAIT_PDL 0
#define GEMVP_WAIT_DONE 1

// gemvp_wait_done returns once *done >= need, every thread's later reads
// seeing what the writers of those units stored before counting them
// (gemvp_count_done).
__device__ __forceinline__ void gemvp_wait_done(const unsigned* done, unsigned need) {
#ifndef STRATA_EMU
  if (threadIdx.x == 0) {
    const volatile unsigned* vd = done;
    while (*vd < need) __nanosleep(32);
    __threadfence();
  }
#endif
  __syncthreads();
}

// gemvp_count_done adds n finished units to *done after every thread's
// stores of them.
__device__ __forceinline__ void gemvp_count_done(unsigned* done, int n) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0 && n > 0) atomicAdd(done, (unsigned)n);
}

// gemvp_prefetch asks the L2 (ring_prefetch, warp 0) for the rows of
// the first n units of a block (ids first, first + stride, ...; unit b
// of group g: rows [b·ur, (b + 1)·ur) of matrix(g), contiguous).
// gemvp_rows calls it before its wait, so that a launch started early
// (PDL) streams its weights into the L2 while the kernel before it runs,
// rather than only its ring's first stages.
template <typename M>
__device__ __forceinline__ void gemvp_prefetch(M matrix, int first, int stride, int n, int units, int ur, int rows,
                                               long long rowBytes) {
  if (threadIdx.x >= 32) return;
  for (int i = 0; i < n; ++i) {
    const int id = first + i * stride, g = id / units, b = id - g * units;
    const long long r0 = (long long)b * ur;
    ring_prefetch(matrix(g) + r0 * rowBytes, (min((long long)rows, r0 + ur) - r0) * rowBytes);
  }
}

// gemvp_rows: see the top of the file. rs and cs are log2 of the FP8
// scale block's rows and of its columns in chunks (the host takes gemvp
// only when both are powers of two); a matrix of another format ignores
// them.
// CLAIM: the block takes its units one at a time from the counter *claim
// (in the order it reaches them, S - 1 steps ahead of computing them)
// instead of the fixed assignment above, so that the resident blocks do
// every unit whatever the others do (gemvp_chain: no block waits for one
// that is not resident). WAIT: what it waits on before staging x
// (GEMVP_WAIT_*; with GEMVP_WAIT_DONE, *done reaching need). It returns
// the units the block computed. pf (fixed units only): the units of the
// block whose rows it asks the L2 for before its wait (gemvp_prefetch).
// A claim (a round trip to the L2, every block at one counter) is kept
// off the ring: thread 0 asks for the next ordinal's unit as it hands
// out this one's, and pre, when not negative, is its first claim, made
// by the caller earlier (its value on thread 0 only counts).
template <int FMT, int SPLIT, int U, int S, int WAIT = GEMVP_WAIT_PDL, bool CLAIM = false>
__device__ __forceinline__ int gemvp_rows(float* __restrict__ y0, int ygs, const float* __restrict__ x0, int xgs,
                                          const u8* __restrict__ w0, const u8* __restrict__ s0,
                                          const u64* __restrict__ tab, int units, int groups, int rows, int K,
                                          int rs, int cs, int scaleCols, unsigned* claim = nullptr,
                                          const unsigned* done = nullptr, unsigned need = 0, int pre = -1,
                                          int pf = 0) {
  typedef gemv_fmt<FMT> F;
  enum { XP = (F::PER / 4) % 2 == 0 ? F::PER + 4 : F::PER };
  const int R = GEMVP_ROWS, G = 8 / SPLIT, NT = 256;
  DYN_SHARED(uint4, ring);                      // [S][U][R][NT]
  float* xs = (float*)(ring + S * U * R * NT);  // [K / PER][XP]
  __shared__ float red[8][R];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int grp = warp / SPLIT, part = warp % SPLIT;
  const long long rowBytes =
      FMT == FMT_F32 ? 4ll * K : (FMT == FMT_FP8 ? (long long)K : (FMT == FMT_FP4 ? K / 2 : 2ll * K));
  const int nch = (int)(rowBytes / 16);
  const int stride = 32 * SPLIT;
  const int cfirst = part * 32 + lane;
  // Steps of U chunks a lane per unit: the same for every lane (a lane's
  // chunks past the row are neither copied nor computed).
  const int steps = (nch + U * stride - 1) / (U * stride);
  const int total = units * groups;
  // This block's units are blockIdx.x + i·gridDim.x < total, or with
  // CLAIM those it claims: mine is then set once a claim comes back past
  // the last unit.
  int mine = CLAIM ? 0x7fffffff
                   : ((int)blockIdx.x < total ? (total - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0);
  __shared__ int claimed[4];  // the units of ordinals i & 3 (at most S - 1 ahead)
  // pend (thread 0): the claim of the next fresh ordinal, in flight while
  // the ring runs. Once one comes back past the last unit, no more are
  // made, so every unit claimed is one the block computes.
  unsigned pend = 0;
  if (CLAIM && tid == 0) pend = pre >= 0 ? (unsigned)pre : atomicAdd(claim, 1u);
  // take sets c's unit to the one of its ordinal, handing out the claim
  // made for it when fresh (every thread calls it at the same point).
  auto take = [&](gemvp_cursor& c, bool fresh) {
    if (c.i >= mine) return;  // past the block's last unit (uniform)
    if (fresh) {
      __syncthreads();
      if (tid == 0) claimed[c.i & 3] = (int)pend;
      __syncthreads();
      if (tid == 0 && pend < (unsigned)total) pend = atomicAdd(claim, 1u);
    }
    const int id = claimed[c.i & 3];
    if (id >= total) {
      mine = min(mine, c.i);
      return;
    }
    c.g = id / units;
    c.b = id - c.g * units;
  };
  auto next = [&](gemvp_cursor& c, bool fresh) {
    if (!CLAIM) {
      gemvp_next(c, steps, units);
    } else if (++c.step == steps) {
      c.step = 0;
      ++c.i;
      take(c, fresh);
    }
  };
  auto slot = [&](int st, int u, int i) -> uint4* { return ring + (((st * U + u) * R + i) * NT + tid); };
  auto matrix = [&](int g) -> const u8* { return tab ? (const u8*)tab[2 * g] : w0; };

  // issue queues the copies of the task at cursor c into stage st and
  // commits them (an empty group past the last task, so that every step
  // waits alike).
  auto issue = [&](const gemvp_cursor& c, int st) {
    if (c.i < mine) {
      const u8* w = matrix(c.g);
      const int r0 = (c.b * G + grp) * R;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int ch = cfirst + (c.step * U + u) * stride;
        if (ch < nch) {
#pragma unroll
          for (int i = 0; i < R; ++i)
            ring_copy16(slot(st, u, i), (const uint4*)(w + (long long)min(r0 + i, rows - 1) * rowBytes) + ch);
        }
      }
    }
    ring_commit();
  };

  // in: the next task to copy; at: the next to compute. The first unit's
  // group: the grid may exceed a group's units when grouped.
  gemvp_cursor in = {0, 0, (int)blockIdx.x, 0};
  if (CLAIM) {
    take(in, true);
  } else {
    while (in.b >= units) {
      in.b -= units;
      ++in.g;
    }
  }
  gemvp_cursor at = in;
  // The first stages copy weights only: before PDL_WAIT_LATE, in flight
  // while the kernel before this one finishes (common.cuh).
#pragma unroll
  for (int st = 0; st < S - 1; ++st) {
    issue(in, st);
    next(in, true);
  }
  if (!CLAIM && pf > 0) gemvp_prefetch(matrix, (int)blockIdx.x, (int)gridDim.x, min(mine, pf), units, G * R, rows,
                                       rowBytes);
  if (WAIT == GEMVP_WAIT_PDL) PDL_WAIT_LATE();
  if (WAIT == GEMVP_WAIT_DONE) gemvp_wait_done(done, need);

  // stage_x copies group g's input into xs (the caller syncs).
  auto stage_x = [&](int g) {
    const float4* src = (const float4*)(x0 + (long long)g * xgs);
    for (int v = tid; v < K / 4; v += NT) {
      const int col = 4 * v, c = col / F::PER;
      *(float4*)(xs + c * XP + (col - c * F::PER)) = WAIT == GEMVP_WAIT_DONE ? __ldcg(src + v) : __ldg(src + v);
    }
  };
  int staged = at.g;
  if (mine > 0) stage_x(staged);
  __syncthreads();

  float acc[R];
  const u8* srow[R];
  for (int st = 0; at.i < mine;) {
    // This task's group has landed (S - 2 younger ones may be pending);
    // the stage issued now was last read at the task before, by this
    // thread.
    ring_wait<S - 2>();
    issue(in, st == 0 ? S - 1 : st - 1);
    next(in, true);
    const int r0 = (at.b * G + grp) * R;
    if (at.step == 0) {
      const u8* sc = tab ? (const u8*)tab[2 * at.g + 1] : s0;
      if (at.g != staged && xgs != 0) {  // the same for every thread
        __syncthreads();
        stage_x(at.g);
        __syncthreads();
      }
      staged = at.g;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        acc[i] = 0.0f;
        const int r = min(r0 + i, rows - 1);
        srow[i] = FMT == FMT_FP8 ? sc + (long long)(r >> rs) * scaleCols : sc + (long long)r * (K / 32);
      }
    }
    // The chunks' scale bytes first, their loads in flight together.
    u32 sraw[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = cfirst + (at.step * U + u) * stride;
#pragma unroll
      for (int i = 0; i < R; ++i)
        sraw[u][i] = (FMT == FMT_FP8 || FMT == FMT_FP4) && c < nch ? __ldg(srow[i] + (FMT == FMT_FP8 ? c >> cs : c)) : 0u;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = cfirst + (at.step * U + u) * stride;
      if (c >= nch) break;
      uint4 q[R];
#pragma unroll
      for (int i = 0; i < R; ++i) q[i] = *slot(st, u, i);
      float p[R];
#pragma unroll
      for (int i = 0; i < R; ++i) p[i] = 0.0f;
#pragma unroll
      for (int s = 0; s < F::SUBS; ++s) {
        float wv[R][F::SUB];
#pragma unroll
        for (int i = 0; i < R; ++i) decode_sub_dec<FMT, FMT == FMT_FP8 ? 1 : 0>(q[i], s, wv[i]);
        float xv[F::SUB];
        const float4* xp = (const float4*)(xs + c * XP + s * F::SUB);
#pragma unroll
        for (int j = 0; j < F::SUB / 4; ++j) {
          float4 f = xp[j];
          xv[4 * j] = f.x; xv[4 * j + 1] = f.y; xv[4 * j + 2] = f.z; xv[4 * j + 3] = f.w;
        }
#pragma unroll
        for (int i = 0; i < R; ++i)
#pragma unroll
          for (int j = 0; j < F::SUB; ++j) p[i] = __fmaf_rn(wv[i][j], xv[j], p[i]);
      }
#pragma unroll
      for (int i = 0; i < R; ++i) {
        // FP8: the hardware decoder gave NaN for a NaN code already.
        const float s = FMT == FMT_FP8 ? ue8m0(sraw[u][i]) : chunk_scale_from<FMT>(q[i], sraw[u][i]);
        acc[i] = __fmaf_rn(p[i], s, acc[i]);
      }
    }
    if (at.step == steps - 1) {
      // gemv2's reduction: the butterfly, then the parts in order.
      float* y = y0 + (long long)at.g * ygs;
      float v[R];
#pragma unroll
      for (int i = 0; i < R; ++i) v[i] = warp_sum(acc[i]);
      if (SPLIT == 1) {
#pragma unroll
        for (int i = 0; i < R; ++i)
          if (lane == i && r0 + i < rows) y[r0 + i] = v[i];
      } else {
        if (lane == 0)
#pragma unroll
          for (int i = 0; i < R; ++i) red[warp][i] = v[i];
        __syncthreads();
        if (part == 0 && lane < R) {
          float s = red[warp][lane];
#pragma unroll
          for (int j = 1; j < SPLIT; ++j) s = __fadd_rn(s, red[warp + j][lane]);
          if (r0 + lane < rows) y[r0 + lane] = s;
        }
        __syncthreads();
      }
    }
    next(at, false);
    st = st == S - 1 ? 0 : st + 1;
  }
  return mine;
}

#define GEMVP_ENTRY(F, FMT, U, S, SPLIT)                                                                              \
  extern "C" __global__ void __launch_bounds__(256, 2)                                                            \
      gemvp_##F##_u##U##s##S##_s##SPLIT(float* __restrict__ y, const float* __restrict__ x, const u8* __restrict__ w,     \
                                  const u8* __restrict__ sc, int units, int rows, int K, int rs, int cs,           \
                                  int scaleCols, int pf) {                                                         \
    PDL_OPEN_EARLY();                                                                                              \
    gemvp_rows<FMT, SPLIT, U, S>(y, 0, x, 0, w, sc, 0, units, 1, rows, K, rs, cs, scaleCols, nullptr, nullptr, 0,  \
                                 -1, pf);                                                                          \
  }                                                                                                                \
  extern "C" __global__ void __launch_bounds__(256, 2)                                                            \
      gemvp_##F##_u##U##s##S##_s##SPLIT##_g(float* __restrict__ y, int ygs, const float* __restrict__ x, int xgs,          \
                                      const u64* __restrict__ tab, int units, int groups, int rows, int K, int rs,  \
                                      int cs, int scaleCols, int pf) {                                             \
    PDL_OPEN_EARLY();                                                                                              \
    gemvp_rows<FMT, SPLIT, U, S>(y, ygs, x, xgs, 0, 0, tab, units, groups, rows, K, rs, cs, scaleCols, nullptr,     \
                                 nullptr, 0, -1, pf);                                                              \
  }
#define GEMVP_SPLITS(F, FMT, U, S) \
  GEMVP_ENTRY(F, FMT, U, S, 1)     \
  GEMVP_ENTRY(F, FMT, U, S, 2)     \
  GEMVP_ENTRY(F, FMT, U, S, 4)     \
  GEMVP_ENTRY(F, FMT, U, S, 8)
GEMVP_SPLITS(fp8, FMT_FP8, 2, 4)
GEMVP_SPLITS(fp8, FMT_FP8, 2, 3)

// gemvp_fp8_u2s3_chain: two FP8 products of one token in one launch,
// y = W·u after the grouped product u = W_a[g]·x_g (u's group g at
// u + g·ugs, x's at x + g·xgs; tab the W_a table as the _g entry's): the
// attention's output projections wo_a and wo_b. Each phase is the
// split-1 entry's gemvp_rows (gemvp_fp8_u2s3_s1_g, gemvp_fp8_u2s3_s1) with
// units claimed from counters rather than fixed by the block's index, so
// u and y have those entries' bits. A block that runs out of phase-0
// units queues its first phase-1 weight stages and waits until every
// phase-0 unit is done, where two launches would wait for the first's end
// and the second's start. No block waits for one that is not resident:
// the resident blocks claim every unit (another launch may hold part of
// the device). ctr: 4 counters, zero between launches (phase 0's and
// phase 1's claims, phase 0's units done, the blocks finished; the last
// block to finish zeroes them). A block claims its first phase-1 unit
// as it starts (pre), so that round trip passes under phase 0. Its claims
// touch only the counters before the kernel's wait, as gemvp_rows's own
// first claim: the last launch of the chain, a layer back, zeroed them.
extern "C" __global__ void __launch_bounds__(256, 2)
    gemvp_fp8_u2s3_chain(float* __restrict__ u, int ugs, const float* __restrict__ x, int xgs,
                         const u64* __restrict__ tab, int unitsA, int groups, int rowsA, int KA, int rsA, int csA,
                         int scaleColsA, float* __restrict__ y, const u8* __restrict__ w, const u8* __restrict__ sc,
                         int unitsB, int rowsB, int KB, int rsB, int csB, int scaleColsB, unsigned* ctr) {
  PDL_OPEN_EARLY();
  const int pre = threadIdx.x == 0 ? (int)atomicAdd(ctr + 1, 1u) : 0;
  const int n = gemvp_rows<FMT_FP8, 1, 2, 3, GEMVP_WAIT_PDL, true>(u, ugs, x, xgs, 0, 0, tab, unitsA, groups, rowsA,
                                                                  KA, rsA, csA, scaleColsA, ctr);
  gemvp_count_done(ctr + 2, n);
  gemvp_rows<FMT_FP8, 1, 2, 3, GEMVP_WAIT_DONE, true>(y, 0, u, 0, w, sc, 0, unitsB, 1, rowsB, KB, rsB, csB,
                                                      scaleColsB, ctr + 1, ctr + 2, (unsigned)(unitsA * groups), pre);
  __syncthreads();
  if (threadIdx.x == 0 && atomicAdd(ctr + 3, 1u) == gridDim.x - 1) {
    ctr[0] = ctr[1] = ctr[2] = ctr[3] = 0;
    __threadfence();
  }
}
