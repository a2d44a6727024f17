// moe.cu: mixture-of-experts routing and the experts' products, as the CPU
// backend's MoE computes them. A (token, choice) pair is a "pair"; the
// experts' matrix-vector products run once per pair, with a reduction
// order that depends only on the matrix's shape (lane-strided 16-byte
// chunks, then a butterfly), so a token's result never depends on the
// other pairs of the batch: batch-invariant. Pairs are sorted by expert so
// that a block decodes each weight row once for up to MOE_TILE pairs.

#define MOE_TILE 8
#define MOE_ROWS_PER_WARP 2
#define MOE_MAX_E 1024

__device__ __forceinline__ double softplus_d(double x) { return x > 20.0 ? x : log1p(exp(x)); }

// route_key maps a biased score v of expert e to a 64-bit key that orders
// as the CPU TopK ranks (larger first, NaN above numbers, ties to the
// lower index): the float as an unsigned integer that orders as the
// floats do (-0 as +0, every NaN above +Inf) in the high half, the
// complement of e in the low half (ties to the lower index). Keys are
// unique; the lowest real key's high half is -Inf's, 0x007FFFFF, so a key
// of high half 0 ranks below every expert.
__device__ __forceinline__ u64 route_key(float v, int e) {
  u32 b = __float_as_uint(v);
  if (v != v) b = 0xFFFFFFFFu;
  else if (v == 0.0f) b = 0x80000000u;
  else b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return ((u64)b << 32) | (u64)(~(u32)e);
}

// moe_route scores each token's router logits in place (scoring 0:
// sqrt-softplus, 1: sigmoid, 2: softmax), picks its K experts (tid2eid's
// row of its token id when given, else the K best biased scores) and their
// weights (normalized, times routedScale). One block of NT threads a
// token. The picks by rank, in two rounds with no serial argmax: each
// chunk of 32 experts ranks its keys among themselves (the warp that owns
// the chunk, its keys in shared memory) and keeps its best min(K, 32) as
// candidates; each candidate's rank among all candidates is its rank among
// all experts when below K (the K best of the layer are the K best of
// their chunks). Run 22 measured the serial form (K argmaxes on warp 0)
// at 14.4 us a scored layer's moe_route_sort against 5.5 for a
// hash-routed one. The keys are unique (a strict total order), so the
// picks, and every result, are the same whatever NT: moe_route (NT = 32,
// run 8's one warp a token) and moe_route_b (NT = 256). A block of more
// than NT threads (moe_route_sort's 1024) leaves the work to its first NT.
template <int NT>
__device__ __forceinline__ void moe_route_body(int* idx, float* wt, float* scores, const float* bias,
                                               const int* tid2eid, const int* tokens, int E, int K, int scoring,
                                               float routedScale) {
  __shared__ float sc[MOE_MAX_E];   // the scores
  __shared__ u64 key[MOE_MAX_E];    // the biased scores' keys, padded to whole chunks
  __shared__ u64 cand[MOE_MAX_E];   // each chunk's best min(K, 32) keys
  __shared__ float ps[MOE_MAX_E];   // the picks' scores, in pick order
  const int t = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const bool mine = tid < NT;
  float* s = scores + (long long)t * E;
  if (scoring == 2) {
    if (tid == 0) {
      float mx = __int_as_float(0xFF800000);
      for (int e = 0; e < E; ++e) mx = fmaxf(mx, s[e]);
      float sum = 0.0f;
      for (int e = 0; e < E; ++e) {
        const float v = exp_f(__fsub_rn(s[e], mx));
        sc[e] = v;
        sum = __fadd_rn(sum, v);
      }
      for (int e = 0; e < E; ++e) s[e] = sc[e] = __fdiv_rn(sc[e], sum);
    }
  } else {
    for (int e = tid; mine && e < E; e += NT) {
      const float v = scoring == 0 ? (float)sqrt(softplus_d((double)s[e])) : sigmoid_f(s[e]);
      s[e] = v;
      sc[e] = v;
    }
  }
  __syncthreads();
  int* it = idx + (long long)t * K;
  if (tid2eid) {
    for (int k = tid; mine && k < K; k += NT) {
      const int e = tid2eid[(long long)tokens[t] * K + k];
      it[k] = e;
      ps[k] = sc[e];
    }
  } else {
    const int chunks = (E + 31) >> 5, kc = min(K, 32);
    // Round 1: chunk c on warp c mod (NT/32), lane l holding expert 32c + l.
    for (int c = warp; mine && c < chunks; c += NT / 32) {
      const int e = 32 * c + lane;
      const u64 ke = e < E ? route_key(bias ? __fadd_rn(sc[e], bias[e]) : sc[e], e) : (u64)(~(u32)e);
      key[e] = ke;
      __syncwarp();
      int r = 0;
#pragma unroll 8
      for (int j = 0; j < 32; ++j) r += key[32 * c + j] > ke;
      if (r < kc) cand[c * kc + r] = ke;
      __syncwarp();
    }
    __syncthreads();
    // Round 2: the candidates' ranks among themselves.
    const int nc = chunks * kc;
    for (int i = tid; mine && i < nc; i += NT) {
      const u64 ki = cand[i];
      int r = 0;
#pragma unroll 8
      for (int j = 0; j < nc; ++j) r += cand[j] > ki;
      if (r < K) {
        const int e = (int)~(u32)ki;
        it[r] = e;
        ps[r] = sc[e];
      }
    }
  }
  __syncthreads();
  // Every pick's weight at once, each over the same sum in pick order (the
  // CPU's).
  for (int k = tid; mine && k < K; k += NT) {
    float sum = 0.0f;
    for (int j = 0; j < K; ++j) sum = __fadd_rn(sum, ps[j]);
    wt[(long long)t * K + k] = __fmul_rn(__fdiv_rn(ps[k], __fadd_rn(sum, 1e-20f)), routedScale);
  }
}

#define MOE_ROUTE_ENTRY(NAME, NT)                                                                               \
  extern "C" __global__ void __launch_bounds__(NT)                                                             \
      NAME(int* idx, float* wt, float* scores, const float* bias, const int* tid2eid, const int* tokens, int E, \
           int K, int scoring, float routedScale) {                                                             \
    PDL_WAIT();                                                                                                 \
    moe_route_body<NT>(idx, wt, scores, bias, tid2eid, tokens, E, K, scoring, routedScale);                    \
  }
MOE_ROUTE_ENTRY(moe_route, 32)
MOE_ROUTE_ENTRY(moe_route_b, 256)


// block_scan2 returns on each thread the exclusive prefix sums of a and b
// over the block's threads in thread order (warp shuffles, then the warp
// totals); tot* are the block totals. Every thread calls it.
__device__ __forceinline__ void block_scan2(int a, int b, int* pa, int* pb, int* tota, int* totb) {
  __shared__ int wa[32], wb[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  int sa = a, sb = b;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int ua = __shfl_up_sync(0xFFFFFFFFu, sa, o), ub = __shfl_up_sync(0xFFFFFFFFu, sb, o);
    if (lane >= o) sa += ua, sb += ub;
  }
  if (lane == 31) wa[warp] = sa, wb[warp] = sb;
  __syncthreads();
  if (warp == 0) {
    int xa = lane < nw ? wa[lane] : 0, xb = lane < nw ? wb[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int ua = __shfl_up_sync(0xFFFFFFFFu, xa, o), ub = __shfl_up_sync(0xFFFFFFFFu, xb, o);
      if (lane >= o) xa += ua, xb += ub;
    }
    wa[lane] = xa, wb[lane] = xb;  // inclusive over the warps
  }
  __syncthreads();
  const int oa = warp ? wa[warp - 1] : 0, ob = warp ? wb[warp - 1] : 0;
  *pa = oa + sa - a, *pb = ob + sb - b;
  *tota = wa[nw - 1], *totb = wb[nw - 1];
  __syncthreads();
}

// moe_sort writes into order the P pair ids grouped by expert (by a
// counting sort; the order within an expert is unspecified and does not
// change any result), and into chunks the tiles of the products: runs of
// at most tile (<= MOE_TILE) pairs of one expert, experts in order, as
// (first sorted position, count), count 0 ending the list, and after the
// list's maxChunks entries the count of its non-empty tiles (chunks holds
// 2·maxChunks + 1 ints; gemvx_moe_fp4_ring reads it). One block of 1024
// threads (E <= 1024: thread e owns expert e); dynamic shared memory: 2·E
// ints.
__device__ __forceinline__ void moe_sort_body(int* order, int* chunks, const int* idx, int P, int E, int maxChunks,
                                              int tile) {
  DYN_SHARED(int, cnt);
  int* cur = cnt + E;
  for (int e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = 0;
  __syncthreads();
  for (int q = threadIdx.x; q < P; q += blockDim.x) atomicAdd((unsigned int*)&cnt[idx[q]], 1u);
  __syncthreads();
  const int e = threadIdx.x;
  const int ce = e < E ? cnt[e] : 0, ne = (ce + tile - 1) / tile;
  int first, t0, tot, ntiles;
  block_scan2(ce, ne, &first, &t0, &tot, &ntiles);
  if (e < E) {
    cur[e] = first;
    for (int i = 0; i < ne && t0 + i < maxChunks; ++i) {
      chunks[2 * (t0 + i)] = first + i * tile;
      chunks[2 * (t0 + i) + 1] = min(tile, ce - i * tile);
    }
  }
  for (int n = ntiles + threadIdx.x; n < maxChunks; n += blockDim.x) chunks[2 * n] = 0, chunks[2 * n + 1] = 0;
  if (threadIdx.x == 0) chunks[2 * maxChunks] = min(ntiles, maxChunks);
  __syncthreads();
  for (int q = threadIdx.x; q < P; q += blockDim.x) {
    const int at = (int)atomicAdd((unsigned int*)&cur[idx[q]], 1u);
    order[at] = q;
  }
}

extern "C" __global__ void __launch_bounds__(1024) moe_sort(int* order, int* chunks, const int* idx, int P, int E,
                                                              int maxChunks, int tile) { PDL_WAIT();
  moe_sort_body(order, chunks, idx, P, E, maxChunks, tile);
}

// moe_route_sort is moe_route_b and moe_sort of one token in one block of
// 1024 threads (the host's choice at T = 1): the same idx, wt and order
// (moe_route_body's picks are the same whatever its threads; its first
// 256 take the experts, as moe_route_b's), one launch
// and one block's start fewer on the routed experts' path.
extern "C" __global__ void __launch_bounds__(1024)
    moe_route_sort(int* idx, float* wt, float* scores, const float* bias, const int* tid2eid, const int* tokens, int E,
                   int K, int scoring, float routedScale, int* order, int* chunks, int maxChunks, int tile) { PDL_WAIT();
  moe_route_body<256>(idx, wt, scores, bias, tid2eid, tokens, E, K, scoring, routedScale);
  __syncthreads();  // idx, written by thread 0, before the sort reads it
  moe_sort_body(order, chunks, idx, K, E, maxChunks, tile);
}

// moe_gemv computes y[q] = W_e·x[q / xDiv] for the sorted pairs q of
// expert e = idx[q] (tables of the experts' data and scale pointers);
// blockIdx.z = 1 takes the second table and output (the up projection
// beside the gate). Block y takes tile y of moe_sort's list (at most
// MOE_TILE pairs of one expert). Grid (ceil(rows/16), tiles, 1 or 2).
template <int FMT, bool VEC>
__device__ __forceinline__ void moe_gemv_body(float* y1, float* y3, const float* x, int xDiv, const int* order,
                                              const int* idx, const int* chunks, const u64* tab1, const u64* tab3, int rows,
                                              int cols, int blockRows, int blockCols, int scaleCols) {
  typedef gemv_fmt<FMT> F;
  __shared__ int sq[MOE_TILE], se[MOE_TILE];
  float* y = blockIdx.z ? y3 : y1;
  const u64* tab = blockIdx.z ? tab3 : tab1;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int q0 = chunks[2 * blockIdx.y], qn = chunks[2 * blockIdx.y + 1];
  if (qn == 0) return;
  if (threadIdx.x < qn) {
    sq[threadIdx.x] = order[q0 + threadIdx.x];
    se[threadIdx.x] = idx[sq[threadIdx.x]];
  }
  __syncthreads();
  const long long rowBytes =
      FMT == FMT_F32 ? 4ll * cols : (FMT == FMT_FP8 ? (long long)cols : (FMT == FMT_FP4 ? cols / 2 : 2ll * cols));
  const int r0 = (blockIdx.x * (blockDim.x >> 5) + warp) * MOE_ROWS_PER_WARP;
  for (int i = 0; i < qn;) {
    const int e = se[i];
    int j = i + 1;
    while (j < qn && se[j] == e) ++j;  // one run: the tiles hold one expert
    const int len = j - i;
    const u8* w = (const u8*)tab[2 * e];
    const u8* sc = (const u8*)tab[2 * e + 1];
    const float* xs[MOE_TILE];
#pragma unroll
    for (int pi = 0; pi < MOE_TILE; ++pi) xs[pi] = x + (long long)(sq[min(i + pi, j - 1)] / xDiv) * cols;
    for (int rr = 0; rr < MOE_ROWS_PER_WARP; ++rr) {
      const int r = r0 + rr;
      if (r >= rows) break;
      float acc[MOE_TILE];
#pragma unroll
      for (int pi = 0; pi < MOE_TILE; ++pi) acc[pi] = 0.0f;
      if (VEC) {
        const int nch = (int)(rowBytes / 16);
        for (int c = lane; c < nch; c += 32) {
          const uint4 q = __ldg((const uint4*)(w + r * rowBytes) + c);
          float part[MOE_TILE];
#pragma unroll
          for (int pi = 0; pi < MOE_TILE; ++pi) part[pi] = 0.0f;
#pragma unroll
          for (int s = 0; s < F::SUBS; ++s) {
            float wv[F::SUB];
            decode_sub<FMT>(q, s, wv);
            const int col = c * F::PER + s * F::SUB;
#pragma unroll
            for (int pi = 0; pi < MOE_TILE; ++pi) {
              if (pi < len) {
#pragma unroll
                for (int k = 0; k < F::SUB; ++k) part[pi] = __fmaf_rn(wv[k], xs[pi][col + k], part[pi]);
              }
            }
          }
          const float s = chunk_scale<FMT>(q, sc, r, c, cols, blockRows, blockCols, scaleCols);
#pragma unroll
          for (int pi = 0; pi < MOE_TILE; ++pi) acc[pi] = __fmaf_rn(part[pi], s, acc[pi]);
        }
      } else {
        for (int k = lane; k < cols; k += 32) {
          const float v = elem<FMT>(w, sc, r, k, cols, blockRows, blockCols, scaleCols);
#pragma unroll
          for (int pi = 0; pi < MOE_TILE; ++pi)
            if (pi < len) acc[pi] = __fmaf_rn(v, xs[pi][k], acc[pi]);
        }
      }
#pragma unroll
      for (int pi = 0; pi < MOE_TILE; ++pi) {
        const float a = warp_sum(acc[pi]);
        if (pi < len && lane == 0) y[(long long)sq[i + pi] * rows + r] = a;
      }
    }
    i = j;
  }
}

#define MOE_GEMV_ENTRY(F, FMT)                                                                                   \
  extern "C" __global__ void __launch_bounds__(256)                                                             \
      moe_gemv_##F(float* y1, float* y3, const float* x, int xDiv, const int* order, const int* idx,            \
                   const int* chunks, const u64* tab1, const u64* tab3, int rows, int cols, int blockRows,      \
                   int blockCols,                                                                                \
                   int scaleCols) { PDL_WAIT();                                                                              \
    moe_gemv_body<FMT, true>(y1, y3, x, xDiv, order, idx, chunks, tab1, tab3, rows, cols, blockRows, blockCols,     \
                             scaleCols);                                                                         \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(256)                                                             \
      moe_gemv_##F##_s(float* y1, float* y3, const float* x, int xDiv, const int* order, const int* idx,        \
                       const int* chunks, const u64* tab1, const u64* tab3, int rows, int cols, int blockRows,  \
                       int blockCols,                                                                            \
                       int scaleCols) { PDL_WAIT();                                                                          \
    moe_gemv_body<FMT, false>(y1, y3, x, xDiv, order, idx, chunks, tab1, tab3, rows, cols, blockRows, blockCols,    \
                              scaleCols);                                                                        \
  }
MOE_GEMV_ENTRY(f32, FMT_F32)
MOE_GEMV_ENTRY(bf16, FMT_BF16)
MOE_GEMV_ENTRY(f16, FMT_F16)
MOE_GEMV_ENTRY(fp8, FMT_FP8)
MOE_GEMV_ENTRY(fp4, FMT_FP4)


// swiglu_act: g = silu(min(g, L)) · clamp(u, -L, L), for n values.
extern "C" __global__ void __launch_bounds__(256) swiglu_act(float* g, const float* u, int n, float L) { PDL_WAIT();
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  g[i] = swiglu_f(g[i], u[i], L);
}

// moe_combine: y[t] = Σ_k wt[t][k]·ye[t·K+k] over the token's choices in
// the CPU's order (by expert, then choice), plus shared[t] when given.
// Grid (T, ceil(D/256)).
extern "C" __global__ void __launch_bounds__(256)
    moe_combine(float* y, const float* ye, const float* wt, const int* idx, const float* shared, int K, int D) { PDL_WAIT();
  const int t = blockIdx.x, i = blockIdx.y * blockDim.x + threadIdx.x;
  if (i >= D) return;
  int ord[16];
  for (int k = 0; k < K; ++k) {
    int j = k;
    const int ek = idx[(long long)t * K + k];
    while (j > 0 && idx[(long long)t * K + ord[j - 1]] > ek) {
      ord[j] = ord[j - 1];
      --j;
    }
    ord[j] = k;
  }
  float acc = 0.0f;
  for (int m = 0; m < K; ++m) {
    const long long q = (long long)t * K + ord[m];
    acc = __fadd_rn(acc, __fmul_rn(wt[q], ye[q * D + i]));
  }
  if (shared) acc = __fadd_rn(acc, shared[(long long)t * D + i]);
  y[(long long)t * D + i] = acc;
}

// ---- grouped expert products (rows that allow 16-byte loads) ----
//
// moe_grouped computes the products of every tile of moe_sort's list in
// one launch: block (x, y) takes rows [x·8·R, (x+1)·8·R) of tile y's
// expert (8 warps of R rows) for the tile's pairs (at most PT, one
// expert). With NM = 2 a warp takes the same R rows of W1 and W3 and
// writes h[q][r] = swiglu(W1[r]·x, W3[r]·x) (SwiGLU with limit L, fused);
// with NM = 1 it writes y[q][r] = W2[r]·x. Each lane keeps U 16-byte
// chunks of each of its NM·R rows in flight.
//
// Order: every output is the sum over its row's 16-byte chunks c = lane,
// lane + 32, ... of (the chunk's products in column order)·(its scale),
// then the butterfly over the lanes: it depends on the row's width and the
// format only (the same order as moe_gemv), never on PT, the tile or the
// other pairs: batch-invariant.
template <int FMT, int PT, int NM, int R, int U>
__device__ __forceinline__ void moe_grouped_body(float* y, const float* x, int xDiv, const int* order, const int* idx,
                                                 const int* chunks, const u64* tab1, const u64* tab3, int rows,
                                                 int cols, int blockRows, int blockCols, int scaleCols, float L) {
  typedef gemv_fmt<FMT> F;
  __shared__ int sq[PT];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int q0 = chunks[2 * blockIdx.y], qn = chunks[2 * blockIdx.y + 1];
  if (qn == 0) return;
  if (threadIdx.x < PT) sq[threadIdx.x] = order[q0 + min((int)threadIdx.x, qn - 1)];
  __syncthreads();
  const int r0 = (blockIdx.x * 8 + warp) * R;
  if (r0 >= rows) return;
  const int e = idx[sq[0]];
  const long long rowBytes =
      FMT == FMT_F32 ? 4ll * cols : (FMT == FMT_FP8 ? (long long)cols : (FMT == FMT_FP4 ? cols / 2 : 2ll * cols));
  const int nch = (int)(rowBytes / 16);
  const u8* wm[NM];
  const u8* sm[NM];
  wm[0] = (const u8*)tab1[2 * e];
  sm[0] = (const u8*)tab1[2 * e + 1];
  if (NM == 2) {
    wm[NM - 1] = (const u8*)tab3[2 * e];
    sm[NM - 1] = (const u8*)tab3[2 * e + 1];
  }
  long long rr[R];
#pragma unroll
  for (int i = 0; i < R; ++i) rr[i] = min(r0 + i, rows - 1);
  const float* xs[PT];
#pragma unroll
  for (int pi = 0; pi < PT; ++pi) xs[pi] = x + (long long)(sq[pi] / xDiv) * cols;

  float acc[NM * R][PT];
#pragma unroll
  for (int m = 0; m < NM * R; ++m)
#pragma unroll
    for (int pi = 0; pi < PT; ++pi) acc[m][pi] = 0.0f;
  for (int c0 = lane; c0 < nch; c0 += 32 * U) {
    uint4 q[U][NM * R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + 32 * u;
#pragma unroll
      for (int m = 0; m < NM * R; ++m)
        q[u][m] = c < nch ? __ldg((const uint4*)(wm[m / R] + rr[m % R] * rowBytes) + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + 32 * u;
      if (c >= nch) break;
      float p[NM * R][PT];
#pragma unroll
      for (int m = 0; m < NM * R; ++m)
#pragma unroll
        for (int pi = 0; pi < PT; ++pi) p[m][pi] = 0.0f;
#pragma unroll
      for (int s = 0; s < F::SUBS; ++s) {
        float wv[NM * R][F::SUB];
#pragma unroll
        for (int m = 0; m < NM * R; ++m) decode_sub<FMT>(q[u][m], s, wv[m]);
        const int col = c * F::PER + s * F::SUB;
#pragma unroll
        for (int pi = 0; pi < PT; ++pi) {
          if (pi < qn) {
            float xv[F::SUB];
            const float4* xp = (const float4*)(xs[pi] + col);
#pragma unroll
            for (int j = 0; j < F::SUB / 4; ++j) {
              const float4 f = __ldg(xp + j);
              xv[4 * j] = f.x; xv[4 * j + 1] = f.y; xv[4 * j + 2] = f.z; xv[4 * j + 3] = f.w;
            }
#pragma unroll
            for (int m = 0; m < NM * R; ++m)
#pragma unroll
              for (int k = 0; k < F::SUB; ++k) p[m][pi] = __fmaf_rn(wv[m][k], xv[k], p[m][pi]);
          }
        }
      }
#pragma unroll
      for (int m = 0; m < NM * R; ++m) {
        const float sc = chunk_scale<FMT>(q[u][m], sm[m / R], rr[m % R], c, cols, blockRows, blockCols, scaleCols);
#pragma unroll
        for (int pi = 0; pi < PT; ++pi) acc[m][pi] = __fmaf_rn(p[m][pi], sc, acc[m][pi]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < NM * R; ++m)
#pragma unroll
    for (int pi = 0; pi < PT; ++pi) acc[m][pi] = warp_sum(acc[m][pi]);
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      if (r0 + i >= rows) break;
#pragma unroll
      for (int pi = 0; pi < PT; ++pi) {
        if (pi >= qn) break;
        const float v = NM == 2 ? swiglu_f(acc[i][pi], acc[R + i][pi], L) : acc[i][pi];
        y[(long long)sq[pi] * rows + r0 + i] = v;
      }
    }
  }
}

// moe_gateup_<fmt>_p<PT>: h = swiglu(W1·x, W3·x) for the tiles' pairs;
// grid (ceil(rows/(8·RG)), tiles). moe_down_<fmt>_p<PT>: y = W2·h; grid
// (ceil(rows/(8·RD)), tiles) (moeRows in moeops.go). Tiles of 2 pairs
// (batch 64 decode) take 4 rows of W1 and W3 and 8 of W2 a warp, 2 chunks
// of each in flight (run 3: 2 and 4 rows, 4 chunks): each activation load
// serves more rows (run 4: 9.2 + 4.8 ms a step at batch 64 against 12.3 +
// 6.6); tiles of 1 pair keep run 3's rows (the wider ones measured 0.179 +
// 0.107 ms at batch 1 against 0.170 + 0.101, 1.22 + 0.63 at batch 8
// against 1.08 + 0.62). The sums are the same either way.
#define MOE_GROUPED_ENTRY(F, FMT, PT, RG, UG, RD, UD)                                                             \
  extern "C" __global__ void __launch_bounds__(256)                                                             \
      moe_gateup_##F##_p##PT(float* h, const float* x, int xDiv, const int* order, const int* idx,              \
                             const int* chunks, const u64* tab1, const u64* tab3, int rows, int cols,           \
                             int blockRows, int blockCols, int scaleCols, float L) { PDL_WAIT();                            \
    moe_grouped_body<FMT, PT, 2, RG, UG>(h, x, xDiv, order, idx, chunks, tab1, tab3, rows, cols, blockRows,      \
                                         blockCols, scaleCols, L);                                               \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(256)                                                             \
      moe_down_##F##_p##PT(float* y, const float* x, int xDiv, const int* order, const int* idx,                \
                           const int* chunks, const u64* tab2, const u64* unused, int rows, int cols,           \
                           int blockRows, int blockCols, int scaleCols, float L) { PDL_WAIT();                              \
    moe_grouped_body<FMT, PT, 1, RD, UD>(y, x, xDiv, order, idx, chunks, tab2, unused, rows, cols, blockRows,    \
                                         blockCols, scaleCols, L);                                               \
  }
// The _r3 entries are run 3's tiles of 2 pairs (2 and 4 rows a warp, 4
// chunks in flight), kept to be measured beside (Backend.moeRun3).
#define MOE_GROUPED_R3(F, FMT, PT)                                                                                 \
  extern "C" __global__ void __launch_bounds__(256)                                                             \
      moe_gateup_##F##_p##PT##_r3(float* h, const float* x, int xDiv, const int* order, const int* idx,         \
                                  const int* chunks, const u64* tab1, const u64* tab3, int rows, int cols,      \
                                  int blockRows, int blockCols, int scaleCols, float L) { PDL_WAIT();                       \
    moe_grouped_body<FMT, PT, 2, 2, 4>(h, x, xDiv, order, idx, chunks, tab1, tab3, rows, cols, blockRows,        \
                                       blockCols, scaleCols, L);                                                 \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(256)                                                             \
      moe_down_##F##_p##PT##_r3(float* y, const float* x, int xDiv, const int* order, const int* idx,           \
                                const int* chunks, const u64* tab2, const u64* unused, int rows, int cols,      \
                                int blockRows, int blockCols, int scaleCols, float L) { PDL_WAIT();                         \
    moe_grouped_body<FMT, PT, 1, 4, 4>(y, x, xDiv, order, idx, chunks, tab2, unused, rows, cols, blockRows,      \
                                       blockCols, scaleCols, L);                                                 \
  }
// The _o<n> entries are the FP4 tiles of 1 pair with __launch_bounds__(256,
// n) (at least n blocks an SM: fewer registers a thread, more warps in
// flight; Backend.moeOcc), measured beside; the same sums.
#define MOE_GROUPED_OCC(N)                                                                                       \
  extern "C" __global__ void __launch_bounds__(256, N)                                                          \
      moe_gateup_fp4_p1_o##N(float* h, const float* x, int xDiv, const int* order, const int* idx,              \
                             const int* chunks, const u64* tab1, const u64* tab3, int rows, int cols,           \
                             int blockRows, int blockCols, int scaleCols, float L) { PDL_WAIT();                 \
    moe_grouped_body<FMT_FP4, 1, 2, 2, 4>(h, x, xDiv, order, idx, chunks, tab1, tab3, rows, cols, blockRows,     \
                                          blockCols, scaleCols, L);                                              \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(256, N)                                                          \
      moe_down_fp4_p1_o##N(float* y, const float* x, int xDiv, const int* order, const int* idx,                \
                           const int* chunks, const u64* tab2, const u64* unused, int rows, int cols,           \
                           int blockRows, int blockCols, int scaleCols, float L) { PDL_WAIT();                   \
    moe_grouped_body<FMT_FP4, 1, 1, 4, 4>(y, x, xDiv, order, idx, chunks, tab2, unused, rows, cols, blockRows,   \
                                          blockCols, scaleCols, L);                                              \
  }
MOE_GROUPED_OCC(2)
MOE_GROUPED_OCC(3)
MOE_GROUPED_OCC(4)
#define MOE_GROUPED_ENTRIES(F, FMT)          \
  MOE_GROUPED_ENTRY(F, FMT, 1, 2, 4, 4, 4)   \
  MOE_GROUPED_ENTRY(F, FMT, 2, 4, 2, 8, 2)   \
  MOE_GROUPED_ENTRY(F, FMT, 4, 2, 2, 4, 2)   \
  MOE_GROUPED_ENTRY(F, FMT, 8, 2, 1, 4, 1)   \
  MOE_GROUPED_R3(F, FMT, 2)
MOE_GROUPED_ENTRIES(f32, FMT_F32)
MOE_GROUPED_ENTRIES(bf16, FMT_BF16)
MOE_GROUPED_ENTRIES(f16, FMT_F16)
MOE_GROUPED_ENTRIES(fp8, FMT_FP8)
MOE_GROUPED_ENTRIES(fp4, FMT_FP4)

// ---- grouped expert products, activations in shared memory ----
//
// moe_sx_chunk adds one 16-byte chunk of each of a lane's NMR rows (q,
// with their scale bytes sr) to acc for the tile's qn pairs: per pair the
// chunk's products in column order, times the chunk's scale. xc is the
// chunk's first staged activation of pair 0 (pairs xstride floats
// apart). moe_sx_body and moep_body share it, so their sums are the same.
template <int FMT, int PT, int NMR, int DEC>
__device__ __forceinline__ void moe_sx_chunk(float (&acc)[NMR][PT], const uint4 (&q)[NMR], const u32 (&sr)[NMR],
                                             const float* xc, int xstride, int qn) {
  typedef gemv_fmt<FMT> F;
  float p[NMR][PT];
#pragma unroll
  for (int m = 0; m < NMR; ++m)
#pragma unroll
    for (int pi = 0; pi < PT; ++pi) p[m][pi] = 0.0f;
#pragma unroll
  for (int s = 0; s < F::SUBS; ++s) {
    float wv[NMR][F::SUB];
#pragma unroll
    for (int m = 0; m < NMR; ++m) decode_sub_dec<FMT, DEC>(q[m], s, wv[m]);
#pragma unroll
    for (int pi = 0; pi < PT; ++pi) {
      if (pi < qn) {
        float xv[F::SUB];
#pragma unroll
        for (int j = 0; j < F::SUB / 4; ++j) {
          const float4 f = *(const float4*)(xc + pi * xstride + s * F::SUB + 4 * j);
          xv[4 * j] = f.x; xv[4 * j + 1] = f.y; xv[4 * j + 2] = f.z; xv[4 * j + 3] = f.w;
        }
#pragma unroll
        for (int m = 0; m < NMR; ++m)
#pragma unroll
          for (int k = 0; k < F::SUB; ++k) p[m][pi] = __fmaf_rn(wv[m][k], xv[k], p[m][pi]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < NMR; ++m) {
    const float scl = chunk_scale_from<FMT>(q[m], sr[m]);
#pragma unroll
    for (int pi = 0; pi < PT; ++pi) acc[m][pi] = __fmaf_rn(p[m][pi], scl, acc[m][pi]);
  }
}

// moe_sx_body computes what moe_grouped_body computes, with the same order
// of operations for every output (so the same bits), organized for tiles
// of 2 to 8 pairs (run 4 to 8: the grouped kernels read their weights at
// 0.5-0.9 TB/s there), and taking tiles of 1 too (run 9: 1.5-1.9% off a
// batch-1 or batch-8 step):
//
//   - The tile's activations are staged once per block in dynamic shared
//     memory (xp floats per 16-byte chunk of weights: a chunk's columns,
//     padded by 4 floats when that leaves an even count of float4s, so
//     that the 8 lanes of a quarter warp, 16-byte loads one chunk apart,
//     hit 8 different bank groups). moe_grouped_body reads them from
//     global memory, each lane 128 bytes from the next: a warp's 16-byte
//     load touches 32 cache lines, and the tile's activations (up to 8 ×
//     16 KB at the Flash width) compete in L1 with the weights streaming
//     through it.
//   - A warp takes NM·R rows (4 at the Flash width: 2 of W1 and 2 of W3,
//     or 4 of W2) for G row groups in turn, and its lanes always hold the
//     next step's U chunks of each row in registers while they compute
//     the current one (NM·R·U 16-byte loads in flight a lane, across the
//     row groups too), instead of loading, then computing, then loading.
//   - FP4 decodes through bf16x2 (e2m1x8_bf16) and FP8 through the
//     hardware decoder (e4m3x4_hw): the same values in fewer instructions
//     (the products are bound by their instruction issue once the loads
//     keep up: about 4 decode instructions a weight plus one FMA per
//     pair).
//   - The 4 rows' scale bytes are loaded with their chunks.
//
// Block (x, y): rows [x·G·8·R, (x+1)·G·8·R) of tile y's expert, 8 warps,
// warp w taking rows r0 = ((x·G + g)·8 + w)·R for g < G. Dynamic shared
// memory: PT·ceil(cols/PER)·xp floats (moeSXShared in moeops.go).
//
// Order: as moe_grouped_body (every output is the sum over its row's
// chunks c = lane, lane + 32, ... in that order of (the chunk's products
// in column order)·(its scale), then the butterfly over the lanes),
// independent of PT, G, U, the tile and the other pairs.
// moe_sx_load loads step t's chunks of a warp's NM·R rows into q and their
// scale bytes into s (moe_sx_body): row group t / spg (rows gr0 + 8·R·g
// on), chunks c = lane + 32·(U·(t % spg) + u); zeros past the row's end.
template <int FMT, int NM, int R, int U>
__device__ __forceinline__ void moe_sx_load(uint4 (&q)[U][NM * R], u32 (&s)[U][NM * R], int t, int spg, int gr0,
                                            int lane, int nch, int rows, long long rowBytes, const u8* const (&wm)[NM],
                                            const u8* const (&sm)[NM], int cols, int blockRows, int blockCols,
                                            int scaleCols) {
  const int g = t / spg, j0 = U * (t - g * spg);
  const int r0 = gr0 + g * 8 * R;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int c = lane + 32 * (j0 + u);
#pragma unroll
    for (int m = 0; m < NM * R; ++m) {
      const long long r = min(r0 + m % R, rows - 1);
      q[u][m] = c < nch ? __ldg((const uint4*)(wm[m / R] + r * rowBytes) + c) : make_uint4(0, 0, 0, 0);
      s[u][m] = c < nch ? chunk_scale_byte<FMT>(sm[m / R], r, c, cols, blockRows, blockCols, scaleCols) : 0u;
    }
  }
}

// moe_sx_stage copies the activations of the tile's qn pairs (pair pi's
// row sq[pi] / xDiv of x) into xsh, pair pi at pi·xstride, each 16-byte
// weight chunk's PER columns padded to XP floats (moe_sx_body); the caller
// syncs.
template <int FMT>
__device__ __forceinline__ void moe_sx_stage(float* xsh, const float* x, int xDiv, const int* sq, int qn, int cols,
                                             int xstride) {
  typedef gemv_fmt<FMT> F;
  enum { XP = (F::PER / 4) % 2 == 0 ? F::PER + 4 : F::PER };
  const int cols4 = cols / 4;
  for (int v = threadIdx.x; v < qn * cols4; v += blockDim.x) {
    const int pi = v / cols4, k4 = v - pi * cols4;
    const float4 f = __ldg((const float4*)(x + (long long)(sq[pi] / xDiv) * cols) + k4);
    const int col = 4 * k4, c = col / F::PER;
    *(float4*)(xsh + pi * xstride + c * XP + (col - c * F::PER)) = f;
  }
}

// moe_sx_store ends a warp's row group (rows r0 .. r0 + R - 1): the
// butterfly over the lanes, then lane i·PT + pi stores row i of pair pi
// (SwiGLU of the W1 and W3 sums when NM is 2), and the accumulators
// restart at zero.
template <int PT, int NM, int R>
__device__ __forceinline__ void moe_sx_store(float (&acc)[NM * R][PT], float* y, const int* sq, int qn, int rows, int r0,
                                             float L) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int m = 0; m < NM * R; ++m)
#pragma unroll
    for (int pi = 0; pi < PT; ++pi) acc[m][pi] = warp_sum(acc[m][pi]);
  // Every lane holds every sum: lane i·PT + pi stores (i, pi).
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int pi = 0; pi < PT; ++pi) {
      if (lane == (i * PT + pi) % 32 && pi < qn && r0 + i < rows) {
        const float v = NM == 2 ? swiglu_f(acc[i][pi], acc[R + i][pi], L) : acc[i][pi];
        y[(long long)sq[pi] * rows + r0 + i] = v;
      }
    }
#pragma unroll
  for (int m = 0; m < NM * R; ++m)
#pragma unroll
    for (int pi = 0; pi < PT; ++pi) acc[m][pi] = 0.0f;
}

template <int FMT, int PT, int NM, int R, int U, int DEC>
__device__ __forceinline__ void moe_sx_body(float* y, const float* x, int xDiv, const int* order, const int* idx,
                                            const int* chunks, const u64* tab1, const u64* tab3, int rows, int cols,
                                            int blockRows, int blockCols, int scaleCols, float L, int G) {
  typedef gemv_fmt<FMT> F;
  enum { NMR = NM * R, XP = (F::PER / 4) % 2 == 0 ? F::PER + 4 : F::PER };
  DYN_SHARED(float, xsh);
  __shared__ int sq[PT];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int q0 = chunks[2 * blockIdx.y], qn = chunks[2 * blockIdx.y + 1];
  if (qn == 0) return;
  if (threadIdx.x < PT) sq[threadIdx.x] = order[q0 + min((int)threadIdx.x, qn - 1)];
  __syncthreads();
  const int e = idx[sq[0]];
  const long long rowBytes =
      FMT == FMT_F32 ? 4ll * cols : (FMT == FMT_FP8 ? (long long)cols : (FMT == FMT_FP4 ? cols / 2 : 2ll * cols));
  const int nch = (int)(rowBytes / 16);
  const int nj = (nch + 31) / 32;      // chunks a lane takes of each row
  const int spg = (nj + U - 1) / U;    // steps a row group
  const int xstride = nch * XP;        // one pair's staged activations
  const u8* wm[NM];
  const u8* sm[NM];
  wm[0] = (const u8*)tab1[2 * e];
  sm[0] = (const u8*)tab1[2 * e + 1];
  if (NM == 2) {
    wm[NM - 1] = (const u8*)tab3[2 * e];
    sm[NM - 1] = (const u8*)tab3[2 * e + 1];
  }
  const u8* const(&wmc)[NM] = wm;
  const u8* const(&smc)[NM] = sm;
  // This warp's row groups: those that start inside the matrix.
  const int gr0 = (blockIdx.x * G * 8 + warp) * R;  // first row of group 0
  int ng = 0;
  if (gr0 < rows) ng = min(G, (rows - gr0 + 8 * R - 1) / (8 * R));
  const int nsteps = ng * spg;

  // Step t: row group t / spg, chunks c = lane + 32·(U·(t % spg) + u).
  uint4 qc[U][NMR];
  u32 sc[U][NMR];
  if (nsteps > 0)
    moe_sx_load<FMT, NM, R, U>(qc, sc, 0, spg, gr0, lane, nch, rows, rowBytes, wmc, smc, cols, blockRows, blockCols,
                               scaleCols);

  // Stage the tile's activations (the weights' first loads are in flight).
  moe_sx_stage<FMT>(xsh, x, xDiv, sq, qn, cols, xstride);
  __syncthreads();
  if (nsteps == 0) return;

  float acc[NMR][PT];
#pragma unroll
  for (int m = 0; m < NMR; ++m)
#pragma unroll
    for (int pi = 0; pi < PT; ++pi) acc[m][pi] = 0.0f;
  for (int t = 0; t < nsteps; ++t) {
    uint4 qx[U][NMR];
    u32 sx[U][NMR];
    if (t + 1 < nsteps)
      moe_sx_load<FMT, NM, R, U>(qx, sx, t + 1, spg, gr0, lane, nch, rows, rowBytes, wmc, smc, cols, blockRows, blockCols,
                                 scaleCols);
    const int g = t / spg, j0 = U * (t - g * spg);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = lane + 32 * (j0 + u);
      if (c < nch) {
        moe_sx_chunk<FMT, PT, NMR, DEC>(acc, qc[u], sc[u], xsh + c * XP, xstride, qn);
      }
    }
    if (t - g * spg == spg - 1)  // the row group's last step: its outputs
      moe_sx_store<PT, NM, R>(acc, y, sq, qn, rows, gr0 + g * 8 * R, L);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int m = 0; m < NMR; ++m) qc[u][m] = qx[u][m], sc[u][m] = sx[u][m];
  }
}

// moe_gateup_<fmt>_p<PT>_sx and moe_down_<fmt>_p<PT>_sx are moe_sx_body's
// gate/up (SwiGLU fused) and down products for tiles of PT = 2, 4, 8
// pairs: 2 rows of W1 and 2 of W3, or 4 of W2, a warp; U = 2 chunks of
// each in flight a lane for PT 2 and 4 (8 loads: 128 bytes a lane, 32 KB
// an SM at one block of 256 threads), U = 1 for PT 8 (its accumulators
// take the registers; it is bound by its 8 FMAs a weight anyway). Grid
// (ceil(rows/(8·R·G)), tiles); moeGrouped picks G and the shared memory.
#define MOE_SX_ENTRY(F, FMT, DEC, PT, U)                                                                          \
  extern "C" __global__ void __launch_bounds__(256)                                                             \
      moe_gateup_##F##_p##PT##_sx(float* h, const float* x, int xDiv, const int* order, const int* idx,         \
                                  const int* chunks, const u64* tab1, const u64* tab3, int rows, int cols,      \
                                  int blockRows, int blockCols, int scaleCols, float L, int G) { PDL_WAIT();    \
    moe_sx_body<FMT, PT, 2, 2, U, DEC>(h, x, xDiv, order, idx, chunks, tab1, tab3, rows, cols, blockRows,        \
                                       blockCols, scaleCols, L, G);                                              \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(256)                                                             \
      moe_down_##F##_p##PT##_sx(float* y, const float* x, int xDiv, const int* order, const int* idx,           \
                                const int* chunks, const u64* tab2, const u64* unused, int rows, int cols,      \
                                int blockRows, int blockCols, int scaleCols, float L, int G) { PDL_WAIT();      \
    moe_sx_body<FMT, PT, 1, 4, U, DEC>(y, x, xDiv, order, idx, chunks, tab2, unused, rows, cols, blockRows,      \
                                       blockCols, scaleCols, L, G);                                              \
  }
#define MOE_SX_ENTRIES(F, FMT, DEC) \
  MOE_SX_ENTRY(F, FMT, DEC, 1, 2)   \
  MOE_SX_ENTRY(F, FMT, DEC, 2, 2)   \
  MOE_SX_ENTRY(F, FMT, DEC, 4, 2)   \
  MOE_SX_ENTRY(F, FMT, DEC, 8, 1)
MOE_SX_ENTRIES(f32, FMT_F32, 0)
MOE_SX_ENTRIES(bf16, FMT_BF16, 0)
MOE_SX_ENTRIES(f16, FMT_F16, 0)
MOE_SX_ENTRIES(fp8, FMT_FP8, 1)
MOE_SX_ENTRIES(fp4, FMT_FP4, 2)

// ---- moep: the _sx expert products for tiles of 1 and 2 pairs with
// their weight loads in a ring ----
//
// moep_body computes moe_sx_body's products for tiles of 1 and 2 pairs
// with their weight loads in a shared-memory ring (ring.cuh) instead of
// registers: the same bits as the _sx entry of the same tile.
//
// Why: a tile of one pair is most of decode up to batch 16 at the Flash
// width (batch 1: 6 tiles a layer, batch 8: ~45), and there the _sx
// kernels read their FP4 weights at 1.0-1.4 TB/s (run 10). They hold the
// next step's 8 chunks in registers while computing the current ones:
// 160 registers a thread, one block of 8 warps an SM (2 warps a
// scheduler to hide the decode's dependent chains), and about 80 register
// moves in the loop (cuobjdump of the NVRTC 12.4 build: 1728 instructions
// in the loop body for a step of 256 weights a lane, the row group's
// epilogue included). Here a step is one chunk of each of the warp's NM·R
// rows, S - 1 steps of copies are in flight a thread, and the 121
// registers allow two blocks an SM. The instructions a weight stay about
// the same: what this can buy is latency hidden, not issue slots.
//
// Block (x, y), rows, tiles, activations staged in shared memory and the
// order of every sum: as moe_sx_body, with U = 1. Dynamic shared
// memory: the ring, S · NM·R · 256 · 16 bytes, then moeSXShared's
// activations (moepShared in moeops.go).

template <int FMT, int PT, int NM, int R, int S, int DEC>
__device__ __forceinline__ void moep_body(float* y, const float* x, int xDiv, const int* order, const int* idx,
                                          const int* chunks, const u64* tab1, const u64* tab3, int rows, int cols,
                                          int blockRows, int blockCols, int scaleCols, float L, int G) {
  typedef gemv_fmt<FMT> F;
  enum { NMR = NM * R, XP = (F::PER / 4) % 2 == 0 ? F::PER + 4 : F::PER, NT = 256 };
  DYN_SHARED(uint4, ring);                           // [S][NMR][NT]
  float* xsh = (float*)(ring + S * NMR * NT);        // moe_sx_body's
  __shared__ int sq[PT];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int q0 = chunks[2 * blockIdx.y], qn = chunks[2 * blockIdx.y + 1];
  if (qn == 0) return;
  if (tid < PT) sq[tid] = order[q0 + min(tid, qn - 1)];
  __syncthreads();
  const int e = idx[sq[0]];
  const long long rowBytes =
      FMT == FMT_F32 ? 4ll * cols : (FMT == FMT_FP8 ? (long long)cols : (FMT == FMT_FP4 ? cols / 2 : 2ll * cols));
  const int nch = (int)(rowBytes / 16);
  const int nj = (nch + 31) / 32;  // chunks a lane takes of each row: the steps of a row group
  const int xstride = nch * XP;
  const u8* wm[NM];
  const u8* sm[NM];
  wm[0] = (const u8*)tab1[2 * e];
  sm[0] = (const u8*)tab1[2 * e + 1];
  if (NM == 2) {
    wm[NM - 1] = (const u8*)tab3[2 * e];
    sm[NM - 1] = (const u8*)tab3[2 * e + 1];
  }
  const int gr0 = (blockIdx.x * G * 8 + warp) * R;  // first row of the warp's group 0
  int ng = 0;
  if (gr0 < rows) ng = min(G, (rows - gr0 + 8 * R - 1) / (8 * R));
  const int nsteps = ng * nj;
  auto slot = [&](int st, int m) -> uint4* { return ring + ((st * NMR + m) * NT + tid); };

  // issue queues step (g, j)'s copies (chunk c = lane + 32·j of each row
  // of group g) into stage st and commits them; an empty group past the
  // warp's last step.
  int ig = 0, ij = 0;
  auto issue = [&](int st) {
    if (ig < ng) {
      const int c = lane + 32 * ij, r0 = gr0 + ig * 8 * R;
      if (c < nch)
#pragma unroll
        for (int m = 0; m < NMR; ++m)
          ring_copy16(slot(st, m), (const uint4*)(wm[m / R] + (long long)min(r0 + m % R, rows - 1) * rowBytes) + c);
      if (++ij == nj) ij = 0, ++ig;
    }
    ring_commit();
  };
#pragma unroll
  for (int st = 0; st < S - 1; ++st) issue(st);

  // Stage the tile's activations (the weights' first copies are in flight).
  moe_sx_stage<FMT>(xsh, x, xDiv, sq, qn, cols, xstride);
  __syncthreads();
  if (nsteps == 0) return;

  float acc[NMR][PT];
#pragma unroll
  for (int m = 0; m < NMR; ++m)
#pragma unroll
    for (int pi = 0; pi < PT; ++pi) acc[m][pi] = 0.0f;
  int g = 0, j = 0;
  for (int t = 0, st = 0; t < nsteps; ++t) {
    // Step t's copies have landed; the stage issued now was last read at
    // step t - 1, by this thread.
    ring_wait<S - 2>();
    issue(st == 0 ? S - 1 : st - 1);
    const int c = lane + 32 * j, r0 = gr0 + g * 8 * R;
    if (c < nch) {
      u32 sraw[NMR];
#pragma unroll
      for (int m = 0; m < NMR; ++m)
        sraw[m] = chunk_scale_byte<FMT>(sm[m / R], min(r0 + m % R, rows - 1), c, cols, blockRows, blockCols, scaleCols);
      uint4 q[NMR];
#pragma unroll
      for (int m = 0; m < NMR; ++m) q[m] = *slot(st, m);
      moe_sx_chunk<FMT, PT, NMR, DEC>(acc, q, sraw, xsh + c * XP, xstride, qn);
    }
    if (j == nj - 1) {  // the row group's last step: its outputs, as moe_sx_body
      moe_sx_store<PT, NM, R>(acc, y, sq, qn, rows, r0, L);
      j = 0, ++g;
    } else {
      ++j;
    }
    st = st == S - 1 ? 0 : st + 1;
  }
}

// moe_gateup_<fmt>_p<PT>_sxp and moe_down_<fmt>_p<PT>_sxp: moep_body's
// gate/up (2 rows of W1 and 2 of W3 a warp, SwiGLU fused) and down (4 rows
// of W2) products, the arguments of the _sx entries. Rings of S = 4
// stages: 64 KB.
#define MOEP_ENTRY(F, FMT, DEC, PT)                                                                              \
  extern "C" __global__ void __launch_bounds__(256, 2)                                                          \
      moe_gateup_##F##_p##PT##_sxp(float* h, const float* x, int xDiv, const int* order, const int* idx,        \
                                   const int* chunks, const u64* tab1, const u64* tab3, int rows, int cols,     \
                                   int blockRows, int blockCols, int scaleCols, float L, int G) { PDL_WAIT();   \
    moep_body<FMT, PT, 2, 2, 4, DEC>(h, x, xDiv, order, idx, chunks, tab1, tab3, rows, cols, blockRows,           \
                                     blockCols, scaleCols, L, G);                                                \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(256, 2)                                                          \
      moe_down_##F##_p##PT##_sxp(float* y, const float* x, int xDiv, const int* order, const int* idx,          \
                                 const int* chunks, const u64* tab2, const u64* unused, int rows, int cols,     \
                                 int blockRows, int blockCols, int scaleCols, float L, int G) { PDL_WAIT();     \
    moep_body<FMT, PT, 1, 4, 4, DEC>(y, x, xDiv, order, idx, chunks, tab2, unused, rows, cols, blockRows,         \
                                     blockCols, scaleCols, L, G);                                                \
  }
MOEP_ENTRY(fp4, FMT_FP4, 2, 1)
MOEP_ENTRY(fp4, FMT_FP4, 2, 2)
MOEP_ENTRY(fp8, FMT_FP8, 1, 1)
MOEP_ENTRY(fp8, FMT_FP8, 1, 2)

// ---- moeq: Fast FP4 experts on the integer dot products ----
//
// moeq_body computes the expert products of moep_body's tiles (1 to 8
// pairs of one expert, SwiGLU fused for gate and up) for FP4 weights in
// Fast mode, with the 4-way int8 dot product (dp4a) instead of float32
// multiply-adds.
//
// Why: at batches below moeHMinT the float32 _sx/_sxp kernels read the
// experts at 1.2-1.5 TB/s, bound by their ~6.7 instructions a weight
// (about 4 to decode a code into a float, one FMA a pair) at 2-4 warps a
// scheduler; gemvx_moe_fp4_h's float16 tensor cores spend 4.4 (NOTES.md,
// runs 9-12). Here a code becomes an int8 byte (2·e2m1 is an integer in
// [-12, 12]) by table lookups of four codes at once (three byte
// permutes: 11 instructions for 8 codes), and one dp4a multiplies four
// of them by four activation digits: about 2.3 instructions a weight.
//
// Numerics (exact but for the activations' rounding): each 32-column
// block of a pair's activations (one block of the weights' UE8M0 scales)
// is scaled by a power of two S = 2^(21-e), e the exponent of its largest
// magnitude, and rounded to the integer x_int = rint(x·S), |x_int| <=
// 2^22: x is carried to 2^-22 of its block's largest value (float16
// hi + lo in gemvx_moe_fp4_h: ~2^-22 of the row's). x_int is split into
// three signed base-256 digits (h·2^16 + m·2^8 + l), each multiplied by
// the block's 32 codes in dp4a chains, and the digit sums combined into
// Σ 2·e2m1·x_int exactly in int32 (at most 32·12·2^22 < 2^31). That sum,
// converted to float32 once (rounded), times 2^(e-22)·scale, is added to
// the row's float32 accumulator. A block holding a NaN or an infinity
// contributes NaN (so the output is NaN, as the CPU's can only be NaN or
// infinite there); a block of magnitudes under 2^-100 contributes 0.
//
// Order: every output is the sum over its row's chunks c = lane,
// lane + 32, ... in that order, then the butterfly over the lanes, as
// moep_body: independent of the tile's size and of the other pairs
// (batch-invariant among the batches that take it).
//
// Block (x, y), rows and tiles as moep_body; G row groups a block
// (moeqGroups in moeops.go: about one wave of blocks). Dynamic shared
// memory (moeqShared): the weights' ring (S·NM·R·256 16-byte slots), the
// scale words' ring (S·NM·R·256 4-byte slots), then the tile's
// activations as moeq_stage writes them.

// 2·e2m1 of the codes 0-7 (MOEQ_T0, MOEQ_T1) and 8-15 (MOEQ_T2,
// MOEQ_T3), as int8 bytes in code order.
#define MOEQ_T0 0x03020100u  // 0, 1, 2, 3
#define MOEQ_T1 0x0C080604u  // 4, 6, 8, 12
#define MOEQ_T2 0xFDFEFF00u  // 0, -1, -2, -3
#define MOEQ_T3 0xF4F8FAFCu  // -4, -6, -8, -12

// MOEQ_REC is the 4-byte words of one 32-column block of staged
// activations: 8 words of each digit (h, m, l; 4 columns a word, in
// column order), the block's factor 2^(e-22) as float bits, and 3 words
// of padding (112 bytes: the 8 lanes of a quarter warp, 16-byte loads one
// block apart, hit 8 different bank groups).
#define MOEQ_REC 28

// moeq_opaque returns c through an asm statement, so that what a block
// stores in shared memory from it is not a constant to the compiler
// (LLVM replaces the loads of a shared word stored only with one
// constant by that constant).
__device__ __forceinline__ u32 moeq_opaque(u32 c) {
#ifdef STRATA_EMU
  return c;
#else
  u32 r;
  asm volatile("mov.b32 %0, %1;" : "=r"(r) : "r"(c));
  return r;
#endif
}

// moeq_prmt is PRMT with every selector nibble under 8 (a byte of {b, a}
// each: what __byte_perm computes, without the masks NVRTC adds to clear
// the nibbles' bit 3).
__device__ __forceinline__ u32 moeq_prmt(u32 a, u32 b, u32 s) {
#ifdef STRATA_EMU
  return __byte_perm(a, b, s);
#else
  u32 r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
  return r;
#endif
}

// e2m1x8_i8 writes the codes of w (low nibble first) as int8 bytes of
// 2·e2m1: codes 0-3 into d0, 4-7 into d1. Each code's magnitude (its low
// 3 bits) picks a byte of the positive table (t0, MOEQ_T1) and of the
// negative one (t2, MOEQ_T3), and its sign (bit 3, moved to the
// selector's bit 2) which (c3210: 0x32103210): 11 instructions for 8
// codes. The caller holds t0, t2 and c3210 in registers loaded from shared
// memory: NVRTC keeps constants in uniform registers and copies one out
// again before each PRMT or LOP3 that reads it (16 instructions for 8
// codes).
__device__ __forceinline__ void e2m1x8_i8(u32 w, u32 t0, u32 t2, u32 c3210, int& d0, int& d1) {
  const u32 m = w & 0x77777777u, mh = m >> 16;
  const u32 sel = ((w >> 1) & 0x44444444u) | c3210, selh = sel >> 16;
  d0 = (int)moeq_prmt(moeq_prmt(t0, MOEQ_T1, m), moeq_prmt(t2, MOEQ_T3, m), sel);
  d1 = (int)moeq_prmt(moeq_prmt(t0, MOEQ_T1, mh), moeq_prmt(t2, MOEQ_T3, mh), selh);
}

// moeq_pack4 packs the low bytes of a, b, c, d (in that order).
__device__ __forceinline__ u32 moeq_pack4(int a, int b, int c, int d) {
  return __byte_perm(__byte_perm((u32)a, (u32)b, 0x0040u), __byte_perm((u32)c, (u32)d, 0x0040u), 0x5410u);
}

// moeq_stage writes the activations of the tile's qn pairs (pair pi's row
// sq[pi] / xDiv of x, cols a multiple of 32) into xq as MOEQ_REC-word
// blocks, pair pi's nch = cols/32 blocks at pi·nch·MOEQ_REC: each thread
// takes 4 columns a round, 8 consecutive lanes a block (their largest
// magnitude by shuffles), and loads MOEQ_ROUNDS rounds' columns before it
// converts any (one wait on L2 for them, not one a round); every thread
// of the block calls it, and the caller syncs.
#define MOEQ_ROUNDS 4
__device__ __forceinline__ void moeq_stage(u32* xq, const float* x, int xDiv, const int* sq, int qn, int cols) {
  const int cols4 = cols / 4, nch = cols / 32, total = qn * cols4;
  for (int v0 = 0; v0 < total; v0 += MOEQ_ROUNDS * blockDim.x) {  // whole warps a round: the shuffles
    float f[MOEQ_ROUNDS][4];
#pragma unroll
    for (int u = 0; u < MOEQ_ROUNDS; ++u) {
      const int v = v0 + u * blockDim.x + threadIdx.x;
      f[u][0] = f[u][1] = f[u][2] = f[u][3] = 0.0f;
      if (v < total) {
        const int pi = v / cols4, k4 = v - pi * cols4;
        const float4 g = __ldg((const float4*)(x + (long long)(sq[pi] / xDiv) * cols) + k4);
        f[u][0] = g.x, f[u][1] = g.y, f[u][2] = g.z, f[u][3] = g.w;
      }
    }
#pragma unroll
    for (int u = 0; u < MOEQ_ROUNDS; ++u) {
      const int v = v0 + u * blockDim.x + threadIdx.x;
      int xq4[4], e;
      bool fin;
      moe_block_quant(f[u], xq4, e, fin);
      int h[4], md[4], l[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int xi = xq4[i];
        l[i] = (signed char)xi;  // balanced base-256 digits: xi = h·2^16 + m·2^8 + l
        const int r = (xi - l[i]) / 256;
        md[i] = (signed char)r;
        h[i] = (r - md[i]) / 256;
      }
      if (v < total) {
        const int pi = v / cols4, k4 = v - pi * cols4;
        u32* rec = xq + (pi * nch + k4 / 8) * MOEQ_REC;
        const int j = k4 & 7;
        rec[j] = moeq_pack4(h[0], h[1], h[2], h[3]);
        rec[8 + j] = moeq_pack4(md[0], md[1], md[2], md[3]);
        rec[16 + j] = moeq_pack4(l[0], l[1], l[2], l[3]);
        if (j == 0) rec[24] = fin ? (u32)(e - 22 + 127) << 23 : QNAN_BITS;
      }
    }
  }
}

// moeq_chunk adds one chunk (32 codes, one scale block) of each of a
// lane's NMR rows (q, their scale bytes sr) to acc for the tile's qn
// pairs, rec the chunk's staged block of pair 0 (pairs pstride words
// apart).
template <int PT, int NMR>
__device__ __forceinline__ void moeq_chunk(float (&acc)[NMR][PT], const uint4 (&q)[NMR], const u32 (&sr)[NMR],
                                           const u32* rec, int pstride, int qn, u32 t0, u32 t2,
                                           u32 c3210) {
#pragma unroll
  for (int pi = 0; pi < PT; ++pi) {
    if (pi < qn) {
      const u32* rp = rec + pi * pstride;
      int xd[24];
#pragma unroll
      for (int j = 0; j < 6; ++j) {
        const uint4 v = *(const uint4*)(rp + 4 * j);
        xd[4 * j] = (int)v.x, xd[4 * j + 1] = (int)v.y, xd[4 * j + 2] = (int)v.z, xd[4 * j + 3] = (int)v.w;
      }
      const float xs = __uint_as_float(rp[24]);
#pragma unroll
      for (int m = 0; m < NMR; ++m) {
        int d[8];
#pragma unroll
        for (int k = 0; k < 4; ++k) e2m1x8_i8(word_of(q[m], k), t0, t2, c3210, d[2 * k], d[2 * k + 1]);
        int sh = 0, sm = 0, sl = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          sh = __dp4a(d[j], xd[j], sh);
          sm = __dp4a(d[j], xd[8 + j], sm);
          sl = __dp4a(d[j], xd[16 + j], sl);
        }
        const int t = sh * 65536 + sm * 256 + sl;  // Σ 2·e2m1·x_int, exact
        acc[m][pi] = __fmaf_rn(__int2float_rn(t), __fmul_rn(ue8m0(sr[m]), xs), acc[m][pi]);
      }
    }
  }
}

// moeq_store ends a warp's row group (rows r0 .. r0 + R - 1) as
// moe_sx_store does (the butterfly, then lane i·PT + pi stores row i of
// pair pi, SwiGLU of the W1 and W3 sums when NM is 2), with each storing
// lane selecting its own sums first so that the lanes compute their
// SwiGLUs at once rather than one after another; the same values.
template <int PT, int NM, int R>
__device__ __forceinline__ void moeq_store(float (&acc)[NM * R][PT], float* y, const int* sq, int qn, int rows, int r0,
                                           float L) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int m = 0; m < NM * R; ++m)
#pragma unroll
    for (int pi = 0; pi < PT; ++pi) acc[m][pi] = warp_sum(acc[m][pi]);
  float a = 0.0f, b = 0.0f;
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int pi = 0; pi < PT; ++pi)
      if (lane == i * PT + pi) a = acc[i][pi], b = acc[NM == 2 ? R + i : i][pi];
  const int i = lane / PT, pi = lane - i * PT;
  if (lane < R * PT && pi < qn && r0 + i < rows)
    y[(long long)sq[pi] * rows + r0 + i] = NM == 2 ? swiglu_f(a, b, L) : a;
#pragma unroll
  for (int m = 0; m < NM * R; ++m)
#pragma unroll
    for (int pi = 0; pi < PT; ++pi) acc[m][pi] = 0.0f;
}

template <int PT, int NM, int R, int S>
__device__ __forceinline__ void moeq_body(float* y, const float* x, int xDiv, const int* order, const int* idx,
                                          const int* chunks, const u64* tab1, const u64* tab3, int rows, int cols,
                                          float L, int G, int early, int pf) {
  enum { NMR = NM * R, NT = 256 };
  DYN_SHARED(uint4, ring);                          // [S][NMR][NT] chunks
  u32* sring = (u32*)(ring + S * NMR * NT);         // [S][NMR][NT] scale words
  u32* xq = sring + S * NMR * NT;                   // moeq_stage's blocks
  __shared__ int sq[PT];
  __shared__ u32 tabs[3][32];  // e2m1x8_i8's constants, a copy a lane
  // early 1 (moe_down's entries, launched early by the host): the kernel
  // before this one is the gate/up product, which let it launch only
  // after moe_route_sort had finished, so the tile list, the pairs' order
  // and experts (read through L2) and the weights may be read before the
  // wait; only the activations (the gate/up product's output) wait for it.
  // early 2 (moe_gateup's, tiles of one pair of one token, launched early):
  // the token's activations (row 0, written before the router's product
  // started) are staged before the wait for moe_route_sort, and the
  // kernel after this one may launch only after that wait.
  // early 0: the wait first (moe_down's entries let the next kernel
  // launch before it, moe_gateup's after it).
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (early == 2) {
    if (tid == 0) sq[0] = 0;
    __syncthreads();
    moeq_stage(xq, x, xDiv, sq, 1, cols);
    __syncthreads();  // sq is the tile's pair from here on
  }
  if (early != 1) PDL_WAIT_LATE();
  if (early != 1) PDL_OPEN_EARLY();
  const int q0 = __ldcg(chunks + 2 * blockIdx.y), qn = __ldcg(chunks + 2 * blockIdx.y + 1);
  if (qn == 0) return;
  if (tid < PT) sq[tid] = __ldcg(order + q0 + min(tid, qn - 1));
  if (tid < 32) tabs[0][tid] = moeq_opaque(MOEQ_T0), tabs[1][tid] = moeq_opaque(MOEQ_T2), tabs[2][tid] = moeq_opaque(0x32103210u);
  __syncthreads();
  const int e = __ldcg(idx + sq[0]);
  const long long rowBytes = cols / 2;
  const int nch = cols / 32, scaleCols = cols / 32;
  const int nj = (nch + 31) / 32;  // chunks a lane takes of each row: the steps of a row group
  const int pstride = nch * MOEQ_REC;
  const u8* wm[NM];
  const u8* sm[NM];
  wm[0] = (const u8*)tab1[2 * e];
  sm[0] = (const u8*)tab1[2 * e + 1];
  if (NM == 2) {
    wm[NM - 1] = (const u8*)tab3[2 * e];
    sm[NM - 1] = (const u8*)tab3[2 * e + 1];
  }
  const int gr0 = (blockIdx.x * G * 8 + warp) * R;  // first row of the warp's group 0
  // pf: the block's rows of each matrix (G·8·R from blockIdx.x·G·8·R,
  // contiguous) asked of the L2 at once, deeper than the ring.
  if (pf && warp == 0) {
    const long long b0 = (long long)blockIdx.x * G * 8 * R;
    const long long nb = (min((long long)rows, b0 + (long long)G * 8 * R) - b0) * rowBytes;
#pragma unroll
    for (int m = 0; m < NM; ++m) ring_prefetch(wm[m] + b0 * rowBytes, nb);
  }
  int ng = 0;
  if (gr0 < rows) ng = min(G, (rows - gr0 + 8 * R - 1) / (8 * R));
  const int nsteps = ng * nj;
  const int sshift = 8 * (lane & 3);  // chunk c's byte in its scale word (c = lane + 32·j)
  auto slot = [&](int st, int m) -> uint4* { return ring + ((st * NMR + m) * NT + tid); };
  auto sslot = [&](int st, int m) -> u32* { return sring + ((st * NMR + m) * NT + tid); };

  // issue queues step (g, j)'s copies (chunk c = lane + 32·j of each row
  // of group g, and the 4-byte word of its scale byte) into stage st and
  // commits them; an empty group past the warp's last step. The rows'
  // offsets (32 bits: an expert's matrix is under 4 GB) are set at each
  // group's first step.
  int ig = 0, ij = 0;
  u32 wo[NMR], so[NMR];
  auto issue = [&](int st) {
    if (ig < ng) {
      if (ij == 0)
#pragma unroll
        for (int m = 0; m < NMR; ++m) {
          const u32 r = (u32)min(gr0 + ig * 8 * R + m % R, rows - 1);
          wo[m] = r * (u32)rowBytes + 16u * lane;
          so[m] = r * (u32)scaleCols + (lane & ~3);
        }
      if (lane + 32 * ij < nch)
#pragma unroll
        for (int m = 0; m < NMR; ++m) {
          ring_copy16(slot(st, m), wm[m / R] + wo[m] + 512u * ij);
          ring_copy4(sslot(st, m), sm[m / R] + so[m] + 32u * ij);
        }
      if (++ij == nj) ij = 0, ++ig;
    }
    ring_commit();
  };
#pragma unroll
  for (int st = 0; st < S - 1; ++st) issue(st);

  // Stage the tile's activations (the weights' first copies are in flight).
  if (early == 1) PDL_WAIT_LATE();
  if (early != 2) moeq_stage(xq, x, xDiv, sq, qn, cols);
  __syncthreads();
  if (nsteps == 0) return;

  float acc[NMR][PT];
#pragma unroll
  for (int m = 0; m < NMR; ++m)
#pragma unroll
    for (int pi = 0; pi < PT; ++pi) acc[m][pi] = 0.0f;
  // Read at the lane's own address, so that the compiler cannot prove them
  // uniform and keep them in uniform registers (copied out before each use).
  const u32 t0 = tabs[0][lane], t2 = tabs[1][lane], c3210 = tabs[2][lane];
  int g = 0, j = 0;
  for (int t = 0, st = 0; t < nsteps; ++t) {
    // Step t's copies have landed; the stage issued now was last read at
    // step t - 1, by this thread.
    ring_wait<S - 2>();
    issue(st == 0 ? S - 1 : st - 1);
    const int c = lane + 32 * j, r0 = gr0 + g * 8 * R;
    if (c < nch) {
      u32 sraw[NMR];
      uint4 q[NMR];
#pragma unroll
      for (int m = 0; m < NMR; ++m) {
        sraw[m] = (*sslot(st, m) >> sshift) & 0xFFu;
        q[m] = *slot(st, m);
      }
      moeq_chunk<PT, NMR>(acc, q, sraw, xq + c * MOEQ_REC, pstride, qn, t0, t2, c3210);
    }
    if (j == nj - 1) {  // the row group's last step: its outputs
      moeq_store<PT, NM, R>(acc, y, sq, qn, rows, r0, L);
      j = 0, ++g;
    } else {
      ++j;
    }
    st = st == S - 1 ? 0 : st + 1;
  }
}

// moe_gateup_fp4_p<PT>_q and moe_down_fp4_p<PT>_q: moeq_body's gate/up (2
// rows of W1 and 2 of W3 a warp, SwiGLU fused) and down (4 rows of W2)
// products for tiles of PT pairs, FP4 rows of a multiple of 128 columns
// (the scale words' alignment): rings of 3 stages (60 KB), the registers
// of 3 blocks an SM for tiles of 1 pair (shared memory allowing 3 up to
// 4096 columns), 2 for 2 and 4, 1 for 8; the _q4 entries (run 14's first,
// measured beside: the same bits) rings of 4 stages (80 KB) at 2.
#define MOEQ_ENTRY(PT, SUF, S, MINB)                                                                             \
  extern "C" __global__ void __launch_bounds__(256, MINB)                                                       \
      moe_gateup_fp4_p##PT##_q##SUF(float* h, const float* x, int xDiv, const int* order, const int* idx,       \
                                    const int* chunks, const u64* tab1, const u64* tab3, int rows, int cols,    \
                                    float L, int G, int early, int pf) {                                        \
    moeq_body<PT, 2, 2, S>(h, x, xDiv, order, idx, chunks, tab1, tab3, rows, cols, L, G, early, pf);             \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(256, MINB)                                                       \
      moe_down_fp4_p##PT##_q##SUF(float* y, const float* x, int xDiv, const int* order, const int* idx,         \
                                  const int* chunks, const u64* tab2, const u64* unused, int rows, int cols,    \
                                  float L, int G, int early, int pf) {                                          \
    PDL_OPEN_EARLY();                                                                                           \
    moeq_body<PT, 1, 4, S>(y, x, xDiv, order, idx, chunks, tab2, unused, rows, cols, L, G, early, pf);           \
  }
MOEQ_ENTRY(1, , 3, 3)
MOEQ_ENTRY(2, , 3, 2)
MOEQ_ENTRY(4, , 3, 2)
MOEQ_ENTRY(8, , 3, 1)
MOEQ_ENTRY(1, 4, 4, 2)
