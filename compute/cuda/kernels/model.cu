// model.cu: the model-level operations of compute.Backend that are not
// matrix products (embedding, hyper-connection mixing, the compressor, the
// indexer's scores, the cache rings; attention is attn.cu's), computed as the CPU
// backend computes them: float32 with the same products and sums in the
// same order where that is cheap (per channel, per key), float64
// exponentials rounded to float32, and fixed-order block reductions
// elsewhere. Every output depends only on its own token's inputs and on the
// shapes: batch-invariant.

#define MT 256

// ---- embedding, gathers, elementwise ----

template <int FMT>
__device__ __forceinline__ void embed_body(float* h, const u8* w, const u8* sc, const int* tokens, int rows, int D,
                                           int copies, int blockRows, int blockCols, int scaleCols) {
  const int t = blockIdx.x, i = blockIdx.y * blockDim.x + threadIdx.x;
  if (i >= D) return;
  const int tok = tokens[t];
  const float v = (tok < 0 || tok >= rows) ? __uint_as_float(QNAN_BITS)
                                           : elem<FMT>(w, sc, tok, i, D, blockRows, blockCols, scaleCols);
  for (int c = 0; c < copies; ++c) h[((long long)t * copies + c) * D + i] = v;
}

#define EMBED_ENTRY(F, FMT)                                                                                   \
  extern "C" __global__ void __launch_bounds__(MT) embed_##F(float* h, const u8* w, const u8* sc,            \
                                                             const int* tokens, int rows, int D, int copies, \
                                                             int blockRows, int blockCols, int scaleCols) { PDL_WAIT();  \
    embed_body<FMT>(h, w, sc, tokens, rows, D, copies, blockRows, blockCols, scaleCols);                     \
  }
EMBED_ENTRY(f32, FMT_F32)
EMBED_ENTRY(bf16, FMT_BF16)
EMBED_ENTRY(f16, FMT_F16)
EMBED_ENTRY(fp8, FMT_FP8)
EMBED_ENTRY(fp4, FMT_FP4)

// add_repeated: h[r] += e[r / n], rows of cols; grid (rows, ceil(cols/MT)).
extern "C" __global__ void __launch_bounds__(MT) add_repeated(float* h, const float* e, int cols, int n) { PDL_WAIT();
  const int r = blockIdx.x, i = blockIdx.y * blockDim.x + threadIdx.x;
  if (i >= cols) return;
  h[(long long)r * cols + i] = __fadd_rn(h[(long long)r * cols + i], e[(long long)(r / n) * cols + i]);
}

// copy_cols copies cols values of each row between strided rows; grid (rows,
// ceil(cols/MT)).
extern "C" __global__ void __launch_bounds__(MT) copy_cols(float* dst, int ldd, const float* src, int lds, int cols) { PDL_WAIT();
  const int r = blockIdx.x, i = blockIdx.y * blockDim.x + threadIdx.x;
  if (i >= cols) return;
  dst[(long long)r * ldd + i] = src[(long long)r * lds + i];
}

// scale_f32: x[i] *= s for n values.
extern "C" __global__ void __launch_bounds__(MT) scale_f32(float* x, int n, float s) { PDL_WAIT();
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __fmul_rn(x[i], s);
}

// rope_heads is rope (rows.cu) with one position per heads rows: row r
// turns by pos[r / heads]. Grid (rows, ceil(nf/MT)).
extern "C" __global__ void __launch_bounds__(MT)
    rope_heads(float* x, int n, const int* pos, int heads, const float* invFreq, int nf, int inverse) { PDL_WAIT();
  const int i = blockIdx.y * blockDim.x + threadIdx.x;
  if (i >= nf) return;
  const int r = blockIdx.x;
  float c, s;
  rope_cs(pos[r / heads], invFreq[i], inverse, &c, &s);
  float* p = x + (long long)r * n + (n - 2 * nf) + 2 * i;
  rope_turn(p[0], p[1], c, s, &p[0], &p[1]);
}

// ---- hyper-connections ----

#define HC_MAX 16

// softmax32 is the CPU's: float32 max and sum, float64 exponentials.
__device__ __forceinline__ void softmax32(float* x, int n) {
  float mx = __int_as_float(0xFF800000);
  for (int i = 0; i < n; ++i) mx = gomax(mx, x[i]);
  float s = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float e = exp_f(__fsub_rn(x[i], mx));
    x[i] = e;
    s = __fadd_rn(s, e);
  }
  for (int i = 0; i < n; ++i) x[i] = __fdiv_rn(x[i], s);
}

__device__ __forceinline__ void sinkhorn_cols(float* c, int hc, float eps) {
  for (int k = 0; k < hc; ++k) {
    float s = 0.0f;
    for (int j = 0; j < hc; ++j) s = __fadd_rn(s, c[j * hc + k]);
    s = __fadd_rn(s, eps);
    for (int j = 0; j < hc; ++j) c[j * hc + k] = __fdiv_rn(c[j * hc + k], s);
  }
}

__device__ __forceinline__ void sinkhorn_rows(float* c, int hc, float eps) {
  for (int j = 0; j < hc; ++j) {
    float s = 0.0f;
    for (int k = 0; k < hc; ++k) s = __fadd_rn(s, c[j * hc + k]);
    s = __fadd_rn(s, eps);
    for (int k = 0; k < hc; ++k) c[j * hc + k] = __fdiv_rn(c[j * hc + k], s);
  }
}

// hc_pre_finish turns each token's mix (mix row t, (2+hc)·hc values) into
// pre, post and comb (Sinkhorn) as the CPU's HCPre, and writes x[t] =
// Σ_j pre_j·h[t][j]. One block a token; thread 0 does the small algebra.
extern "C" __global__ void __launch_bounds__(MT)
    hc_pre_finish(float* x, float* post, float* comb, const float* h, const float* mix, const float* base,
                  const float* scale, int hc, int D, float eps, int iters) { PDL_WAIT();
  __shared__ float pre[HC_MAX];
  __shared__ float c[HC_MAX * HC_MAX];
  const int t = blockIdx.x, nMix = (2 + hc) * hc;
  const float* mx = mix + (long long)t * nMix;
  if (threadIdx.x == 0) {
    for (int j = 0; j < hc; ++j) {
      pre[j] = __fadd_rn(sigmoid_f(__fadd_rn(__fmul_rn(mx[j], scale[0]), base[j])), eps);
      post[t * hc + j] = __fmul_rn(2.0f, sigmoid_f(__fadd_rn(__fmul_rn(mx[hc + j], scale[1]), base[hc + j])));
    }
    for (int i = 0; i < hc * hc; ++i) c[i] = __fadd_rn(__fmul_rn(mx[2 * hc + i], scale[2]), base[2 * hc + i]);
    for (int j = 0; j < hc; ++j) {
      softmax32(c + j * hc, hc);
      for (int k = 0; k < hc; ++k) c[j * hc + k] = __fadd_rn(c[j * hc + k], eps);
    }
    sinkhorn_cols(c, hc, eps);
    for (int it = 0; it < iters - 1; ++it) {
      sinkhorn_rows(c, hc, eps);
      sinkhorn_cols(c, hc, eps);
    }
    for (int i = 0; i < hc * hc; ++i) comb[(long long)t * hc * hc + i] = c[i];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < hc; ++j) acc = __fadd_rn(acc, __fmul_rn(pre[j], h[((long long)t * hc + j) * D + i]));
    x[(long long)t * D + i] = acc;
  }
}

// ---- hyper-connection mix split over the width ----
//
// hc_mix_partial: for a float32 fn (nMix rows of n = hc·D), each block
// (t, s) sums over segment s of token t's streams, the columns [s·w,
// (s+1)·w) of every stream (hc·w <= MT: element e = j·cw + (i - s·w) of
// the segment's hc·cw on thread e), the nMix products fn[r][k]·h[k] and
// the squares h[k]² (the butterfly, then the warps in order) into
// part[t][s][0..nMix] (hc_mix_sums). The RMS norm's factor r is applied
// after the sum: mix[r] = r·Σ fn[r][k]·h[k] (the CPU multiplies fn by the
// normalized h; the two differ by rounding only). The order depends on the
// shapes alone: batch-invariant. Segments of columns rather than of the
// flat streams so that hc_post_pre, which writes h' a column at a time,
// sums the same elements in the same order. Grid (T, ceil(D/w)).

#define HC_MIX_MAX ((2 + HC_MAX) * HC_MAX)
#define HC_MIX_ROWS 24  // the Flash width's nMix: every row's loads in flight at once

// hc_seg_elem maps thread tid of segment s (columns [s·w, s·w + cw)) to its
// element: stream j, column i; valid says whether it has one.
__device__ __forceinline__ bool hc_seg_elem(int tid, int s, int w, int hc, int D, int* j, int* i) {
  const int c0 = s * w, cw = min(w, D - c0);
  const bool valid = tid < hc * cw;
  *j = valid ? tid / cw : 0;
  *i = c0 + (valid ? tid - *j * cw : 0);
  return valid;
}

// hc_fn_load loads rows [r0, r0 + HC_MIX_ROWS) of fn's element k (zeros
// past nMix or where not valid).
__device__ __forceinline__ void hc_fn_load(float (&f)[HC_MIX_ROWS], const float* __restrict__ fn, int r0, int nMix,
                                           int n, long long k, bool valid) {
#pragma unroll
  for (int i = 0; i < HC_MIX_ROWS; ++i) f[i] = valid && r0 + i < nMix ? __ldg(fn + (long long)(r0 + i) * n + k) : 0.0f;
}

// hc_mix_sums writes one block's partial sums of the mix products: thread
// tid holds element k (flat index j·D + i) of value v when valid; fn has
// nMix rows of n, the first HC_MIX_ROWS of them already in f0 (hc_fn_load)
// when f0 is given. part points at the block's nMix + 1 floats (the
// squares last). Every thread of the block calls it.
__device__ __forceinline__ void hc_mix_sums(float* __restrict__ part, float v, bool valid, long long k,
                                            const float* __restrict__ fn, int nMix, int n, float (*red)[HC_MIX_MAX + 1],
                                            const float (*f0)[HC_MIX_ROWS] = nullptr) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float ss = valid ? __fmaf_rn(v, v, 0.0f) : 0.0f;
  ss = warp_sum(ss);
  if (lane == 0) red[warp][nMix] = ss;
  for (int r0 = 0; r0 < nMix; r0 += HC_MIX_ROWS) {
    float f[HC_MIX_ROWS];
    if (f0 && r0 == 0) {
#pragma unroll
      for (int i = 0; i < HC_MIX_ROWS; ++i) f[i] = (*f0)[i];
    } else {
      hc_fn_load(f, fn, r0, nMix, n, k, valid);
    }
#pragma unroll
    for (int i = 0; i < HC_MIX_ROWS; ++i) {
      const float a = warp_sum(__fmaf_rn(f[i], v, 0.0f));
      if (lane == 0 && r0 + i < nMix) red[warp][r0 + i] = a;
    }
  }
  __syncthreads();
  for (int r = tid; r <= nMix; r += MT) {
    float a = red[0][r];
    for (int w = 1; w < MT / 32; ++w) a = __fadd_rn(a, red[w][r]);
    part[r] = a;
  }
}

extern "C" __global__ void __launch_bounds__(MT)
    hc_mix_partial(float* __restrict__ part, const float* __restrict__ h, const float* __restrict__ fn, int nMix, int hc,
                   int D, int w) { PDL_WAIT();
  __shared__ float red[MT / 32][HC_MIX_MAX + 1];
  const int t = blockIdx.x, s = blockIdx.y, S = gridDim.y;
  int j, i;
  const bool valid = hc_seg_elem(threadIdx.x, s, w, hc, D, &j, &i);
  const long long k = (long long)j * D + i;
  const float v = valid ? h[(long long)t * hc * D + k] : 0.0f;
  hc_mix_sums(part + ((long long)t * S + s) * (nMix + 1), v, valid, k, fn, nMix, hc * D, red);
}

// hc_mix_sum returns, on lanes that hold them, token t's mix values r =
// lane, lane + 32, ... (< nMix) into mix (shared), the S segments in
// order, times the norm's factor; every lane of the warp calls it.
__device__ __forceinline__ void hc_mix_sum(float* mix, const float* part, int t, int S, int nMix, int n, float normEps) {
  const int lane = threadIdx.x & 31;
  const float* pt = part + (long long)t * S * (nMix + 1);
  const float ss = hc_seg_sum(pt + nMix, S, nMix + 1);
  const float rr = (float)(1.0 / sqrt((double)__fadd_rn(__fdiv_rn(ss, (float)n), normEps)));
  for (int r = lane; r < nMix; r += 32) mix[r] = __fmul_rn(hc_seg_sum(pt + r, S, nMix + 1), rr);
  __syncwarp();
}

// HC_REDUCE_STAGE: the most partial sums (S·(nMix+1) floats) hc_mix_reduce
// stages in shared memory.
#define HC_REDUCE_STAGE 2048

// hc_mix_reduce writes mix[t][r] from the partials (hc_mix_sum's). Grid T,
// one warp. With stage, where they fit, the warp loads every partial at
// once into shared memory (one wait on L2; hc_seg_sum waits once for each
// 8 segments, twice in a row for the squares and then the mix values: 16
// waits at 64 segments) and adds them there in hc_seg_sum's order: the
// same sums, so the same bits.
extern "C" __global__ void __launch_bounds__(32)
    hc_mix_reduce(float* mix, const float* part, int S, int nMix, int n, float normEps, int stage) { PDL_WAIT();
  __shared__ float m[HC_MIX_MAX];
  __shared__ float st[HC_REDUCE_STAGE];
  const int t = blockIdx.x, lane = threadIdx.x, nv = nMix + 1, np = S * nv;
  if (!stage || np > HC_REDUCE_STAGE) {
    hc_mix_sum(m, part, t, S, nMix, n, normEps);
  } else {
    const float* pt = part + (long long)t * np;
    for (int i0 = lane; i0 < np; i0 += 16 * 32) {
      float v[16];
#pragma unroll
      for (int u = 0; u < 16; ++u) v[u] = i0 + 32 * u < np ? pt[i0 + 32 * u] : 0.0f;
#pragma unroll
      for (int u = 0; u < 16; ++u)
        if (i0 + 32 * u < np) st[i0 + 32 * u] = v[u];
    }
    __syncwarp();
    float ss = 0.0f;
    for (int s = 0; s < S; ++s) ss = __fadd_rn(ss, st[s * nv + nMix]);
    const float rr = (float)(1.0 / sqrt((double)__fadd_rn(__fdiv_rn(ss, (float)n), normEps)));
    for (int r = lane; r < nMix; r += 32) {
      float a = 0.0f;
      for (int s = 0; s < S; ++s) a = __fadd_rn(a, st[s * nv + r]);
      m[r] = __fmul_rn(a, rr);
    }
    __syncwarp();
  }
  for (int r = lane; r < nMix; r += 32) mix[(long long)t * nMix + r] = m[r];
}

// hc_sinkhorn_lane: the row softmax (+ eps) and Sinkhorn of hc·hc <= 32
// entries, entry e on lane e (lanes >= hc·hc pass e = 0 and discard the
// result), rows and columns through shuffles, each sum in the CPU's
// order; HCT > 0 is hc known at compile time (the same operations,
// unrolled).
template <int HCT>
__device__ __forceinline__ float hc_sinkhorn_lane(float v, int hcr, int e, int iters, float eps) {
  const int hc = HCT > 0 ? HCT : hcr;
  const int j = e / hc, k = e - j * hc;
  float mx = __int_as_float(0xFF800000);
#pragma unroll
  for (int i = 0; i < (HCT > 0 ? HCT : hc); ++i) mx = gomax(mx, __shfl_sync(0xFFFFFFFFu, v, j * hc + i));
  const float ex = exp_f(__fsub_rn(v, mx));
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < (HCT > 0 ? HCT : hc); ++i) sum = __fadd_rn(sum, __shfl_sync(0xFFFFFFFFu, ex, j * hc + i));
  v = __fadd_rn(__fdiv_rn(ex, sum), eps);
  for (int it = 0; it < 2 * iters - 1; ++it) {
    const bool cols = (it & 1) == 0;  // cols, then (rows, cols) iters-1 times
    float sh[HCT > 0 ? HCT : HC_MAX];
#pragma unroll
    for (int i = 0; i < (HCT > 0 ? HCT : HC_MAX); ++i)
      if (HCT > 0 || i < hc) sh[i] = __shfl_sync(0xFFFFFFFFu, v, cols ? i * hc + k : j * hc + i);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < (HCT > 0 ? HCT : HC_MAX); ++i)
      if (HCT > 0 || i < hc) s = __fadd_rn(s, sh[i]);
    v = __fdiv_rn(v, __fadd_rn(s, eps));
  }
  return v;
}

// HC_STAGE: the most partial sums (S·(nMix+1) floats) hc_pre_split copies
// into shared memory with the whole block before warp 0 adds them.
#define HC_STAGE 4096

// HC_SEG_GROUP: hc_stage_mix sums the staged segments in groups of this
// many, in order, then the groups in order.
#define HC_SEG_GROUP 8
// HC_GSUM: hc_stage_mix's group sums: (nMix + 1)·ceil(S/HC_SEG_GROUP)
// <= HC_STAGE/HC_SEG_GROUP + HC_MIX_MAX + 1.
#define HC_GSUM (HC_STAGE / HC_SEG_GROUP + HC_MIX_MAX + 1)

// hc_stage_mix writes token t's mix values mix[r], r < nMix, from the S
// segments' partial sums staged in stage (hc_stage): each sum over the
// segments in groups of HC_SEG_GROUP (one thread a group and value, in
// segment order), then the groups in order; the squares' sum likewise
// gives the norm's factor. Every thread of the block calls it; mix is
// complete after it returns.
__device__ __forceinline__ void hc_stage_mix(float* mix, float* gsum, const float* stage, int S, int nMix, int n,
                                             float normEps) {
  const int G = (S + HC_SEG_GROUP - 1) / HC_SEG_GROUP, nv = nMix + 1;
  for (int q = threadIdx.x; q < nv * G; q += blockDim.x) {
    const int g = q / nv, r = q - g * nv, s1 = min(S, (g + 1) * HC_SEG_GROUP);
    float v = 0.0f;
    for (int s = g * HC_SEG_GROUP; s < s1; ++s) v = __fadd_rn(v, stage[s * nv + r]);
    gsum[q] = v;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    float ss = 0.0f;
    for (int g = 0; g < G; ++g) ss = __fadd_rn(ss, gsum[g * nv + nMix]);
    const float rr = (float)(1.0 / sqrt((double)__fadd_rn(__fdiv_rn(ss, (float)n), normEps)));
    for (int r = threadIdx.x; r < nMix; r += 32) {
      float v = 0.0f;
      for (int g = 0; g < G; ++g) v = __fadd_rn(v, gsum[g * nv + r]);
      mix[r] = __fmul_rn(v, rr);
    }
  }
  __syncthreads();
}

// hc_pre_weights is warp 0's first part of mHC pre for token t from
// hc_mix_partial's sums: the mix values (from global memory, the
// partials in segment order, as hc_mix_sum) unless staged (hc_stage_mix
// wrote mix already), pre and, when writer, post. Every lane of warp 0
// calls it.
__device__ __forceinline__ void hc_pre_weights(float* mix, float* pre, float* __restrict__ post, bool writer,
                                               bool staged, const float* __restrict__ part, int t,
                                               int S, int nMix, int n, float normEps, const float* __restrict__ base,
                                               const float* __restrict__ scale, int hc, float eps) {
  if (!staged) hc_mix_sum(mix, part, t, S, nMix, n, normEps);
  const int lane = threadIdx.x & 31;
  // pre on lanes [0, hc), post on [hc, 2hc): side by side, not one after
  // the other on a lane (each is a float64 exponential and division).
  for (int q = lane; q < 2 * hc; q += 32) {
    if (q < hc) {
      pre[q] = __fadd_rn(sigmoid_f(__fadd_rn(__fmul_rn(mix[q], scale[0]), base[q])), eps);
    } else if (writer) {
      post[t * hc + q - hc] = __fmul_rn(2.0f, sigmoid_f(__fadd_rn(__fmul_rn(mix[q], scale[1]), base[q])));
    }
  }
}

// hc_pre_comb is warp 0's second part: comb (row softmax + eps, then
// Sinkhorn, each sum taken in the CPU's order) from token t's mix, into
// comb[t] (nothing stored where comb is null); c is hc·hc floats of
// shared scratch. Every lane of warp 0 calls it.
__device__ __forceinline__ void hc_pre_comb(float* __restrict__ comb, float* c, const float* mix, int t,
                                            const float* __restrict__ base, const float* __restrict__ scale, int hc,
                                            float eps, int iters) {
  const int lane = threadIdx.x & 31, hh = hc * hc;
  if (hh <= 32) {
    // One entry a lane, in a register; rows and columns through shuffles.
    const int e = lane < hh ? lane : 0;
    float v = __fadd_rn(__fmul_rn(mix[2 * hc + e], scale[2]), base[2 * hc + e]);
    v = hc == 4 ? hc_sinkhorn_lane<4>(v, hc, e, iters, eps) : hc_sinkhorn_lane<0>(v, hc, e, iters, eps);
    if (lane < hh && comb) comb[(long long)t * hh + lane] = v;
    return;
  }
  for (int e = lane; e < hh; e += 32) c[e] = __fadd_rn(__fmul_rn(mix[2 * hc + e], scale[2]), base[2 * hc + e]);
  __syncwarp();
  float nv[HC_MAX * HC_MAX / 32];
  // Row softmax, then + eps.
#pragma unroll
  for (int m = 0; m < HC_MAX * HC_MAX / 32; ++m) {
    const int e = lane + 32 * m;
    if (e >= hh) break;
    const float* row = c + (e / hc) * hc;
    float mx = __int_as_float(0xFF800000);
    for (int k = 0; k < hc; ++k) mx = gomax(mx, row[k]);
    float sum = 0.0f;
    for (int k = 0; k < hc; ++k) sum = __fadd_rn(sum, exp_f(__fsub_rn(row[k], mx)));
    nv[m] = __fadd_rn(__fdiv_rn(exp_f(__fsub_rn(c[e], mx)), sum), eps);
  }
  __syncwarp();
#pragma unroll
  for (int m = 0; m < HC_MAX * HC_MAX / 32; ++m)
    if (lane + 32 * m < hh) c[lane + 32 * m] = nv[m];
  __syncwarp();
  for (int it = 0; it < 2 * iters - 1; ++it) {
    const bool cols = (it & 1) == 0;  // cols, then (rows, cols) iters-1 times
#pragma unroll
    for (int m = 0; m < HC_MAX * HC_MAX / 32; ++m) {
      const int e = lane + 32 * m;
      if (e >= hh) break;
      const int j = e / hc, k = e - j * hc;
      float sum = 0.0f;
      if (cols)
        for (int i = 0; i < hc; ++i) sum = __fadd_rn(sum, c[i * hc + k]);
      else
        for (int i = 0; i < hc; ++i) sum = __fadd_rn(sum, c[j * hc + i]);
      nv[m] = __fdiv_rn(c[e], __fadd_rn(sum, eps));
    }
    __syncwarp();
#pragma unroll
    for (int m = 0; m < HC_MAX * HC_MAX / 32; ++m)
      if (lane + 32 * m < hh) c[lane + 32 * m] = nv[m];
    __syncwarp();
  }
  if (comb)
    for (int e = lane; e < hh; e += 32) comb[(long long)t * hh + e] = c[e];
}

// hc_stage_cg copies np floats of pt into stage with the whole block of
// MT threads, through L2 (__ldcg: other blocks wrote them), eight loads a
// thread in flight before any is stored (one wait on L2 for hc_post_pre's
// 1600 partials, rather than stores that may each wait on their load).
__device__ __forceinline__ void hc_stage_cg(float* stage, const float* pt, int np) {
  for (int q0 = threadIdx.x; q0 < np; q0 += 8 * MT) {
    float v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = q0 + u * MT < np ? __ldcg(pt + q0 + u * MT) : 0.0f;
#pragma unroll
    for (int u = 0; u < 8; ++u)
      if (q0 + u * MT < np) stage[q0 + u * MT] = v[u];
  }
}

// hc_stage copies token t's np partial sums into stage with the whole
// block when they fit (HC_STAGE) and says whether they did.
__device__ __forceinline__ bool hc_stage(float* stage, const float* __restrict__ part, int t, int np) {
  if (np > HC_STAGE) return false;
  const float* pt = part + (long long)t * np;
  for (int i = threadIdx.x; i < np; i += blockDim.x) stage[i] = pt[i];
  __syncthreads();
  return true;
}

// hc_pre_split is hc_pre_finish from hc_mix_partial's sums. Every block
// (t, y) computes token t's mix and pre on warp 0 (hc_pre_weights) and
// writes x[t][i] = Σ_j pre_j·h[t][j][i] for the columns i of its slice
// [y·cw, (y+1)·cw); block y = 0 writes post and then, on warp 0, comb
// (hc_pre_comb: the Sinkhorn steps wait for no one else's columns). The
// grid's y only splits the work: every value is the same whatever it is.
// Grid (T, ceil(D/cw)).
extern "C" __global__ void __launch_bounds__(MT)
    hc_pre_split(float* __restrict__ x, float* __restrict__ post, float* __restrict__ comb, const float* __restrict__ h,
                 const float* __restrict__ part, int S, int n, float normEps, const float* __restrict__ base,
                 const float* __restrict__ scale, int hc, int D, float eps, int iters, int cw) { PDL_WAIT();
  __shared__ float mix[HC_MIX_MAX];
  __shared__ float pre[HC_MAX];
  __shared__ float c[HC_MAX * HC_MAX];
  __shared__ float stage[HC_STAGE];
  __shared__ float gsum[HC_GSUM];
  const int t = blockIdx.x, nMix = (2 + hc) * hc;
  const bool writer = blockIdx.y == 0;
  // The streams of this thread's first column of the slice, loaded before
  // warp 0's chain of sums rather than after it (the same values: h is
  // only read here).
  const int i0 = blockIdx.y * cw, i1 = min(D, i0 + cw), ia = i0 + threadIdx.x;
  float ha[HC_MAX];
#pragma unroll
  for (int j = 0; j < HC_MAX; ++j) ha[j] = j < hc && ia < i1 ? h[((long long)t * hc + j) * D + ia] : 0.0f;
  const bool staged = hc_stage(stage, part, t, S * (nMix + 1));
  if (staged) hc_stage_mix(mix, gsum, stage, S, nMix, n, normEps);
  if (threadIdx.x < 32) hc_pre_weights(mix, pre, post, writer, staged, part, t, S, nMix, n, normEps, base, scale, hc, eps);
  __syncthreads();
  for (int i = ia; i < i1; i += blockDim.x) {
    float hv[HC_MAX];
#pragma unroll
    for (int j = 0; j < HC_MAX; ++j) hv[j] = i == ia ? ha[j] : (j < hc ? h[((long long)t * hc + j) * D + i] : 0.0f);
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < HC_MAX; ++j)
      if (j < hc) acc = __fadd_rn(acc, __fmul_rn(pre[j], hv[j]));
    x[(long long)t * D + i] = acc;
  }
  if (writer && threadIdx.x < 32) hc_pre_comb(comb, c, mix, t, base, scale, hc, eps, iters);
}

// hc_post_pre is hc_post of the site before (h' = post_j·y + Σ_j'
// comb[j'][j]·h_j', in place; skipped when y is null), hc_mix_partial,
// hc_pre_split and rmsnorm(x, x, normW) of this site in one launch, with
// their bits: block (t, s) writes h' for the columns of hc_mix_partial's
// segment s (all of them read before any is written: no other block
// reads them) and the segment's partial sums; the last block of token t
// to finish (cnt[t]) stages the partials, computes mix (hc_stage_mix),
// pre and post (hc_pre_weights), x = Σ_j pre_j·h'_j for every column
// (hc_pre_split's order) and its RMS norm (rms_factor: rmsnorm's order);
// the block that arrived before it waits for it, computes mix again and
// comb (hc_pre_comb) at the same time, and resets cnt[t] for the next
// launch. They read what the others wrote through L2 (__ldcg, after the
// counter's fences).
// The host takes it where hc <= HC_FUSED, S·(nMix + 1) <= HC_STAGE and
// D <= RMS_REGS·MT. Grid (T, S), S = ceil(D/w).
#define HC_FUSED 4
// diag (BenchmarkFlash's diag-hc-* lines, timing only: the outputs are
// then wrong; 0 everywhere else) drops a part of the kernel to measure
// what it costs a step: the mix sums' block reductions (HC_DIAG_SUMS), the
// comb block (HC_DIAG_COMB: the last block resets the counter), the last
// block's work after the counter (HC_DIAG_TAIL).
#define HC_DIAG_TAIL 1
#define HC_DIAG_COMB 2
#define HC_DIAG_SUMS 4
// HC_DIAG_TWICE (timing only too, the outputs unchanged: the tail's and
// the comb block's work after their loads is idempotent) runs that work a
// second time, so that clk's stamps show it once with its code and data
// cold and once warm.
#define HC_DIAG_TWICE 8
// HC_WARM is no diag (the outputs stay right): the two dry blocks a
// launch (hc_post_pre_body), A/B hc-warm.
#define HC_WARM 16
// clk (BenchmarkFlash's hcclock lines; null everywhere else) takes token
// 0's timeline, HC_CLK_STRIDE stamps a launch: each block s's global
// timer at its start and before its counter (2s, 2s + 1, s < 64), and
// the tail's and the comb block's points (hc_stamp).
#define HC_CLK_TAIL 128
#define HC_CLK_COMB 160
#define HC_CLK_STRIDE 256
__device__ __forceinline__ unsigned long long hc_globaltimer() {
#ifdef STRATA_EMU
  return 0;
#else
  unsigned long long g;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
  return g;
#endif
}
// hc_stamp writes point p (< 16) of part q (HC_CLK_TAIL or HC_CLK_COMB):
// the global timer (ns) and the SM's clock, from thread 0.
__device__ __forceinline__ void hc_stamp(unsigned long long* clk, int q, int p) {
#ifndef STRATA_EMU
  if (clk && threadIdx.x == 0) {
    clk[q + p] = hc_globaltimer();
    clk[q + 16 + p] = clock64();
  }
#endif
}
// It opens with PDL_OPEN_EARLY: hc_post_pre_body reads only fn (weights)
// before its PDL_WAIT_LATE, so it may start early (LaunchEarly).
__device__ __forceinline__ void hc_post_pre_body(float* __restrict__ h, const float* __restrict__ y,
                                                 const float* __restrict__ postIn, const float* __restrict__ combIn,
                                                 float* __restrict__ x, float* __restrict__ post, float* __restrict__ comb,
                                                 float* part, unsigned* cnt, const float* __restrict__ fn,
                                                 const float* __restrict__ base, const float* __restrict__ scale,
                                                 const float* __restrict__ normW, int hc, int D, int w, float normEps,
                                                 float eps, int iters, float rmsEps, int diag,
                                                 unsigned long long* clk) {
  __shared__ float red[MT / 32][HC_MIX_MAX + 1];
  __shared__ float mix[HC_MIX_MAX];
  __shared__ float pre[HC_MAX];
  __shared__ float c[HC_MAX * HC_MAX];
  __shared__ float stage[HC_STAGE];
  __shared__ float gsum[HC_GSUM];
  __shared__ float buf[32];
  __shared__ unsigned arrived;
  const int t = blockIdx.x, s = blockIdx.y, tid = threadIdx.x, nMix = (2 + hc) * hc;
  // With HC_WARM the grid has two more blocks a token (s = S and S + 1),
  // and those of token 0 run dry: the last block's code and the comb
  // block's, without waiting for the kernel before (PDL) or for this
  // one's other blocks, and storing nothing. Run 32's timeline found both
  // tails bound by fetching their code; a dry run ahead fetches it into
  // the L2 so that the real tails, which run the same instructions, find
  // it there. What they read is whatever is there (their results are
  // dropped); their eps values are changed so that a store they should not
  // make would show (TestBackendHCPostPreNorm).
  const int S = gridDim.y - (diag & HC_WARM ? 2 : 0);
  const bool dry = s >= S;
  if (dry && t > 0) return;
  float* ht = h + (long long)t * hc * D;
  const int np = S * (nMix + 1);
  unsigned role;  // which arrival this block was at its token's counter
  if (dry) {
    role = s == S ? S - 1 : S - 2;
    clk = nullptr;
    normEps = __fmul_rn(normEps, 2.0f);
    rmsEps = __fmul_rn(rmsEps, 2.0f);
  } else {
    int j, i;
    const bool valid = hc_seg_elem(tid, s, w, hc, D, &j, &i);
    // This thread's mix weights (immutable) before the wait: in flight while
    // the kernel before this one finishes, when launched early (PDL).
    float f0[HC_MIX_ROWS];
    hc_fn_load(f0, fn, 0, nMix, hc * D, (long long)j * D + i, valid);
    PDL_WAIT_LATE();
    if (clk && t > 0) clk = nullptr;
    const bool clkBlock = clk && tid == 0 && s < 64;
    if (clkBlock) clk[2 * s] = hc_globaltimer();
    float v = 0.0f;
    if (y) {
      float old[HC_FUSED];
#pragma unroll
      for (int q = 0; q < HC_FUSED; ++q) old[q] = valid && q < hc ? ht[(long long)q * D + i] : 0.0f;
      __syncthreads();  // the segment's columns are read before any is written
      if (valid) {
        // hc_post's sums for output stream j.
        const float* cb = combIn + (long long)t * hc * hc;
        v = __fmul_rn(postIn[t * hc + j], y[(long long)t * D + i]);
#pragma unroll
        for (int q = 0; q < HC_FUSED; ++q)
          if (q < hc) v = __fadd_rn(v, __fmul_rn(cb[q * hc + j], old[q]));
        ht[(long long)j * D + i] = v;
      }
    } else if (valid) {
      v = ht[(long long)j * D + i];
    }
    if (!(diag & HC_DIAG_SUMS))
      hc_mix_sums(part + (long long)t * np + (long long)s * (nMix + 1), v, valid, (long long)j * D + i, fn, nMix, hc * D,
                  red, &f0);
    // Every thread's h' and partial sums before the counter (threadfence
    // reduction).
    __threadfence();
    __syncthreads();
    if (clkBlock) clk[2 * s + 1] = hc_globaltimer();
    if (tid == 0) arrived = atomicAdd(cnt + t, 1u);
    __syncthreads();
    role = arrived;
  }
  // The last block to arrive computes x; the one before it (on the GPU:
  // the emulator runs blocks one at a time) waits for the last and
  // computes comb meanwhile, and resets the counter.
  float* const combOut = dry ? nullptr : comb;
#ifdef STRATA_EMU
  const bool combHere = true;
  if (role != (unsigned)(S - 1)) return;
  if (tid == 0 && !dry) cnt[t] = 0;
#else
  const bool combHere = S == 1;
  if (diag & HC_DIAG_COMB) {
    // No comb block: the last block resets the counter.
    if (role != (unsigned)(S - 1)) return;
    if (tid == 0 && !dry) cnt[t] = 0;
  } else if (S > 1 && role == (unsigned)(S - 2)) {
    hc_stamp(clk, HC_CLK_COMB, 0);
    if (tid == 0 && !dry) {
      while (atomicAdd(cnt + t, 0u) != (unsigned)S) __nanosleep(20);
      cnt[t] = 0;
    }
    __syncthreads();
    __threadfence();
    hc_stamp(clk, HC_CLK_COMB, 1);
    const float* pt = part + (long long)t * np;
    hc_stage_cg(stage, pt, np);
    __syncthreads();
    hc_stamp(clk, HC_CLK_COMB, 2);
#pragma unroll 1
    for (int pass = 0; pass < (diag & HC_DIAG_TWICE ? 2 : 1); ++pass) {
      hc_stage_mix(mix, gsum, stage, S, nMix, hc * D, normEps);
      hc_stamp(clk, HC_CLK_COMB, 3 + 2 * pass);
      if (tid < 32) hc_pre_comb(combOut, c, mix, t, base, scale, hc, eps, iters);
      hc_stamp(clk, HC_CLK_COMB, 4 + 2 * pass);
      __syncthreads();
    }
    return;
  }
  if (role != (unsigned)(S - 1)) return;
  if (S == 1 && tid == 0 && !dry) cnt[t] = 0;
#endif
  if (diag & HC_DIAG_TAIL) return;
  hc_stamp(clk, HC_CLK_TAIL, 0);
  __threadfence();
  hc_stamp(clk, HC_CLK_TAIL, 1);
  const float* pt = part + (long long)t * np;
  // The columns of x this thread normalizes (rmsnorm's: tid + m·MT), their
  // streams loaded with the partials (in flight together) and used after
  // warp 0 computes pre.
  float hv[RMS_REGS][HC_FUSED];
#pragma unroll
  for (int m = 0; m < RMS_REGS; ++m) {
    const int col = tid + m * MT;
#pragma unroll
    for (int q = 0; q < HC_FUSED; ++q) hv[m][q] = col < D && q < hc ? __ldcg(ht + (long long)q * D + col) : 0.0f;
  }
  hc_stage_cg(stage, pt, np);
  __syncthreads();
  hc_stamp(clk, HC_CLK_TAIL, 2);
#pragma unroll 1
  for (int pass = 0; pass < (diag & HC_DIAG_TWICE ? 2 : 1); ++pass) {
    hc_stage_mix(mix, gsum, stage, S, nMix, hc * D, normEps);
    hc_stamp(clk, HC_CLK_TAIL, 3 + 4 * pass);
    if (tid < 32) hc_pre_weights(mix, pre, post, !dry, true, nullptr, t, S, nMix, hc * D, normEps, base, scale, hc, eps);
    __syncthreads();
    hc_stamp(clk, HC_CLK_TAIL, 4 + 4 * pass);
    float xv[RMS_REGS];
#pragma unroll
    for (int m = 0; m < RMS_REGS; ++m) {
      float acc = 0.0f;
#pragma unroll
      for (int q = 0; q < HC_FUSED; ++q)
        if (q < hc) acc = __fadd_rn(acc, __fmul_rn(pre[q], hv[m][q]));
      xv[m] = tid + m * MT < D ? acc : 0.0f;
    }
    const float r = rms_factor(xv, D, rmsEps, buf);
    hc_stamp(clk, HC_CLK_TAIL, 5 + 4 * pass);
#pragma unroll
    for (int m = 0; m < RMS_REGS; ++m) {
      const int col = tid + m * MT;
      if (col < D && !dry) {
        const float u = __fmul_rn(xv[m], r);
        x[(long long)t * D + col] = normW ? __fmul_rn(normW[col], u) : u;
      }
    }
    hc_stamp(clk, HC_CLK_TAIL, 6 + 4 * pass);
    __syncthreads();
  }
  if (combHere && tid < 32) hc_pre_comb(combOut, c, mix, t, base, scale, hc, eps, iters);
  hc_stamp(clk, HC_CLK_TAIL, 15);
}
extern "C" __global__ void __launch_bounds__(MT)
    hc_post_pre(float* __restrict__ h, const float* __restrict__ y, const float* __restrict__ postIn,
                const float* __restrict__ combIn, float* __restrict__ x, float* __restrict__ post, float* __restrict__ comb,
                float* part, unsigned* cnt, const float* __restrict__ fn, const float* __restrict__ base,
                const float* __restrict__ scale, const float* __restrict__ normW, int hc, int D, int w, float normEps,
                float eps, int iters, float rmsEps, int diag, unsigned long long* clk) {
  PDL_OPEN_EARLY();
  hc_post_pre_body(h, y, postIn, combIn, x, post, comb, part, cnt, fn, base, scale, normW, hc, D, w, normEps, eps, iters,
                   rmsEps, diag, clk);
}

// hc_post_pre_o4 is hc_post_pre (the same body, so the same bits) held to
// four blocks an SM (64 registers a thread; the last block's 64 streams
// and 16 columns a thread spill to local memory): for large batches,
// whose (token, segment) blocks run in waves. Run 22: hc_post_pre sat at
// 128 registers, two blocks an SM, ~244 us a launch at batch 256. Run 23:
// a step 0.7% / 2.4% faster with it at batches 64 / 256 (A/B hc-o4), so
// the host takes it from hcO4MinT tokens unless Backend.hcO2.
extern "C" __global__ void __launch_bounds__(MT, 4)
    hc_post_pre_o4(float* __restrict__ h, const float* __restrict__ y, const float* __restrict__ postIn,
                   const float* __restrict__ combIn, float* __restrict__ x, float* __restrict__ post,
                   float* __restrict__ comb, float* part, unsigned* cnt, const float* __restrict__ fn,
                   const float* __restrict__ base, const float* __restrict__ scale, const float* __restrict__ normW,
                   int hc, int D, int w, float normEps, float eps, int iters, float rmsEps, int diag,
                   unsigned long long* clk) {
  PDL_OPEN_EARLY();
  hc_post_pre_body(h, y, postIn, combIn, x, post, comb, part, cnt, fn, base, scale, normW, hc, D, w, normEps, eps, iters,
                   rmsEps, diag, clk);
}

// hc_post: h'[k] = post[k]·y + Σ_j comb[j][k]·h[j], in place; grid (T,
// ceil(D/MT)).
extern "C" __global__ void __launch_bounds__(MT)
    hc_post(float* h, const float* y, const float* post, const float* comb, int hc, int D) { PDL_WAIT();
  const int t = blockIdx.x, i = blockIdx.y * blockDim.x + threadIdx.x;
  if (i >= D) return;
  float old[HC_MAX];
  for (int j = 0; j < hc; ++j) old[j] = h[((long long)t * hc + j) * D + i];
  const float yv = y[(long long)t * D + i];
  const float* c = comb + (long long)t * hc * hc;
  for (int k = 0; k < hc; ++k) {
    float v = __fmul_rn(post[t * hc + k], yv);
    for (int j = 0; j < hc; ++j) v = __fadd_rn(v, __fmul_rn(c[j * hc + k], old[j]));
    h[((long long)t * hc + k) * D + i] = v;
  }
}

// hc_head_finish: x[r] = Σ_j pre_j·h[r][j] with pre_j = sigmoid(mix·scale[0]
// + base[j]) + eps; grid (R, ceil(D/MT)).
extern "C" __global__ void __launch_bounds__(MT)
    hc_head_finish(float* x, const float* h, const float* mix, const float* base, const float* scale, int hc, int D,
                   float eps) { PDL_WAIT();
  const int r = blockIdx.x, i = blockIdx.y * blockDim.x + threadIdx.x;
  if (i >= D) return;
  float acc = 0.0f;
  for (int j = 0; j < hc; ++j) {
    const float pre = __fadd_rn(sigmoid_f(__fadd_rn(__fmul_rn(mix[r * hc + j], scale[0]), base[j])), eps);
    acc = __fadd_rn(acc, __fmul_rn(pre, h[((long long)r * hc + j) * D + i]));
  }
  x[(long long)r * D + i] = acc;
}

// ---- compressor ----

// compress_bias: z[t] += ape[pos[t] % rate]; grid (T, ceil(cw/MT)).
extern "C" __global__ void __launch_bounds__(MT) compress_bias(float* z, const float* ape, const int* pos, int cw,
                                                               int rate) { PDL_WAIT();
  const int t = blockIdx.x, i = blockIdx.y * blockDim.x + threadIdx.x;
  if (i >= cw) return;
  const int p = pos[t] % rate;
  z[(long long)t * cw + i] = __fadd_rn(z[(long long)t * cw + i], ape[(long long)p * cw + i]);
}

// cmp_token returns the values and scores of position q of span sp: this
// step's rows of A and Z, or the ring's slot for earlier positions.
__device__ __forceinline__ void cmp_token(const float* A, const float* Z, const Paged& ring, const Span& sp, int q,
                                          int cw, int ringSlots, const float** a, const float** z) {
  if (q >= sp.pos0) {
    const long long r = sp.start + q - sp.pos0;
    *a = A + r * cw;
    *z = Z + r * cw;
  } else {
    const float* sl = (const float*)slot_ptr(ring, sp.index, q % ringSlots);
    *a = sl;
    *z = sl + cw;
  }
}

// compress_emit writes the entry of the window that closes at each token
// (position p with (p+1) % rate == 0): per channel the softmax over the
// window's scores of its values (in the CPU's slot order), then the RMS
// norm, the RoPE at the window's first position, and the entries' format.
// One block a token; dynamic shared memory: width floats.
extern "C" __global__ void __launch_bounds__(MT)
    compress_emit(const float* A, const float* Z, const int* tab, int nspans, const int* pos, Paged ring, Paged ents,
                  const float* norm, const float* invFreq, int nf, int width, int rate, int overlap, float eps) { PDL_WAIT();
  __shared__ float buf[32];
  DYN_SHARED(float, out);
  const int t = blockIdx.x, p = pos[t];
  if ((p + 1) % rate != 0) return;
  const Span sp = span_of(tab, nspans, t);
  if (sp.index < 0) return;
  const int w = (p + 1) / rate - 1;
  const int cw = overlap ? 2 * width : width, ringSlots = overlap ? 2 * rate : rate;
  const int off = overlap ? width : 0;
  const float ninf = __int_as_float(0xFF800000);
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    float mx = ninf;
    const float *a, *z;
    if (overlap && w > 0)
      for (int q = (w - 1) * rate; q < w * rate; ++q) {
        cmp_token(A, Z, ring, sp, q, cw, ringSlots, &a, &z);
        mx = gomax(mx, z[i]);
      }
    for (int q = w * rate; q < (w + 1) * rate; ++q) {
      cmp_token(A, Z, ring, sp, q, cw, ringSlots, &a, &z);
      mx = gomax(mx, z[off + i]);
    }
    float num = 0.0f, den = 0.0f;
    if (overlap && w > 0)
      for (int q = (w - 1) * rate; q < w * rate; ++q) {
        cmp_token(A, Z, ring, sp, q, cw, ringSlots, &a, &z);
        const float e = exp_f(__fsub_rn(z[i], mx));
        den = __fadd_rn(den, e);
        num = __fadd_rn(num, __fmul_rn(e, a[i]));
      }
    for (int q = w * rate; q < (w + 1) * rate; ++q) {
      cmp_token(A, Z, ring, sp, q, cw, ringSlots, &a, &z);
      const float e = exp_f(__fsub_rn(z[off + i], mx));
      den = __fadd_rn(den, e);
      num = __fadd_rn(num, __fmul_rn(e, a[off + i]));
    }
    out[i] = __fdiv_rn(num, den);
  }
  __syncthreads();
  float ss = 0.0f;
  for (int i = threadIdx.x; i < width; i += blockDim.x) ss = __fmaf_rn(out[i], out[i], ss);
  ss = bsum(ss, buf);
  const float r = (float)(1.0 / sqrt((double)__fadd_rn(__fdiv_rn(ss, (float)width), eps)));
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    const float v = __fmul_rn(out[i], r);
    out[i] = norm ? __fmul_rn(norm[i], v) : v;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < nf; i += blockDim.x) {
    float c, s;
    rope_cs(w * rate, invFreq[i], false, &c, &s);
    float* q = out + (width - 2 * nf) + 2 * i;
    rope_turn(q[0], q[1], c, s, &q[0], &q[1]);
  }
  __syncthreads();
  encode_row(slot_ptr(ents, sp.index, w), out, ents.fmt, width, ents.rope, buf);
}

// compress_ring keeps, for each span's last ringSlots positions, the token's
// values and scores in ring slot p % ringSlots. One block a token.
extern "C" __global__ void __launch_bounds__(MT) compress_ring(const float* A, const float* Z, const int* tab,
                                                               int nspans, const int* pos, Paged ring, int cw,
                                                               int ringSlots) { PDL_WAIT();
  const int t = blockIdx.x, p = pos[t];
  const Span sp = span_of(tab, nspans, t);
  if (sp.index < 0 || p < max(sp.pos0, sp.pos0 + sp.n - ringSlots)) return;
  float* sl = (float*)slot_ptr(ring, sp.index, p % ringSlots);
  for (int i = threadIdx.x; i < cw; i += blockDim.x) {
    sl[i] = A[(long long)t * cw + i];
    sl[cw + i] = Z[(long long)t * cw + i];
  }
}

// ---- indexer ----

#define IDX_WARPS 8


// dot4 is the CPU's dot: four partial sums in index order, then paired.
__device__ __forceinline__ float dot4(const float* a, const float* b, int n) {
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 = __fadd_rn(s0, __fmul_rn(a[i], b[i]));
    s1 = __fadd_rn(s1, __fmul_rn(a[i + 1], b[i + 1]));
    s2 = __fadd_rn(s2, __fmul_rn(a[i + 2], b[i + 2]));
    s3 = __fadd_rn(s3, __fmul_rn(a[i + 3], b[i + 3]));
  }
  for (; i < n; ++i) s0 = __fadd_rn(s0, __fmul_rn(a[i], b[i]));
  return __fadd_rn(__fadd_rn(s0, s1), __fadd_rn(s2, s3));
}

// indexer_scores_r21 writes scores[t][e] = Σ_h w_h·relu(q_h·k_e)·sscale, w_h =
// W[t][h]·wscale (rounded as the CPU scales W in place), for the
// entries e < n = (pos+1)/rate of tokens with n > topk (the others take
// all their entries: indexer_fix), -Inf for n <= e < maxE. Grid (T,
// ceil(maxE/(IDX_WARPS·ipw))), ipw entries a warp (the host's choice by
// T: no score depends on it); dynamic shared memory: heads·(dim+1) + heads
// + IDX_WARPS·(dim + heads) floats.
extern "C" __global__ void __launch_bounds__(MT)
    indexer_scores_r21(float* scores, const float* Q, const float* W, const int* tab, int nspans, const int* pos,
                   Paged keys, int heads, int dim, int rate, int maxE, int topk, float sscale, int ipw,
                   float wscale) { PDL_WAIT();
  DYN_SHARED(float, sm);
  const int t = blockIdx.x, n = (pos[t] + 1) / rate;
  if (n <= topk) return;
  const int perBlock = IDX_WARPS * ipw, e0 = blockIdx.y * perBlock;
  float* row = scores + (long long)t * maxE;
  const float ninf = __int_as_float(0xFF800000);
  if (e0 >= n) {
    for (int e = e0 + threadIdx.x; e < min(e0 + perBlock, maxE); e += blockDim.x) row[e] = ninf;
    return;
  }
  const Span sp = span_of(tab, nspans, t);
  const int qs = dim + 1;
  float* q = sm;
  float* wh = q + heads * qs;
  float* kb = wh + heads;
  float* ct = kb + IDX_WARPS * dim;
  for (int i = threadIdx.x; i < heads * dim; i += blockDim.x) q[(i / dim) * qs + i % dim] = Q[(long long)t * heads * dim + i];
  for (int h = threadIdx.x; h < heads; h += blockDim.x) wh[h] = __fmul_rn(W[(long long)t * heads + h], wscale);
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* k = kb + warp * dim;
  float* c = ct + warp * heads;
  for (int j = 0; j < ipw; ++j) {
    const int e = e0 + warp * ipw + j;
    if (e >= maxE) break;
    if (e >= n || sp.index < 0) {
      if (lane == 0) row[e] = ninf;
      continue;
    }
    const u8* sl = slot_ptr(keys, sp.index, e);
    for (int i = lane; i < dim; i += 32) k[i] = slot_value(sl, keys.fmt, dim, keys.rope, i);
    __syncwarp();
    for (int h = lane; h < heads; h += 32) {
      const float v = dot4(q + h * qs, k, dim);
      c[h] = v > 0.0f ? __fmul_rn(__fmul_rn(v, sscale), wh[h]) : 0.0f;
    }
    __syncwarp();
    if (lane == 0) {
      float s = 0.0f;
      for (int h = 0; h < heads; ++h) s = __fadd_rn(s, c[h]);
      row[e] = s;
    }
    __syncwarp();
  }
}

// dot4v is dot4 over 16-byte-aligned a and b of n % 4 == 0 values (the
// same operations in the same order), in 16-byte loads.
__device__ __forceinline__ float dot4v(const float* a, const float* b, int n) {
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma unroll 8
  for (int i = 0; i < n; i += 4) {
    const float4 x = *(const float4*)(a + i), y = *(const float4*)(b + i);
    s0 = __fadd_rn(s0, __fmul_rn(x.x, y.x));
    s1 = __fadd_rn(s1, __fmul_rn(x.y, y.y));
    s2 = __fadd_rn(s2, __fmul_rn(x.z, y.z));
    s3 = __fadd_rn(s3, __fmul_rn(x.w, y.w));
  }
  return __fadd_rn(__fadd_rn(s0, s1), __fadd_rn(s2, s3));
}

#define IDX_IPW_MAX 8

// indexer_scores is indexer_scores_r25 (the same scores, bit for bit) with
// each lane's query channels loaded once for all of its warp's ipw keys:
// a lane's heads h = lane, lane + 32, ... against every key, 4 channels
// a step (the query's 16 bytes, then each key's, read by every lane at
// once), each product in dot4's order; then lane j sums key j's heads in
// order. indexer_scores_r25 read the query's channels again for each key
// and summed each key's heads on lane 0 alone: at 64K context (16.6K
// entries a token) it took 53.7 us a batch-1 step (run 25 call 2, H100),
// bound by shared-memory wavefronts (5 a 4-channel step a key; here 4 + ipw
// for ipw keys). The host takes it where dim <= 128, dim % 4 == 0, heads
// % 4 == 0, ipw <= IDX_IPW_MAX and the shared memory fits; dynamic shared
// memory: heads·(dim+4) + heads + IDX_WARPS·ipw·(dim + heads) floats.
extern "C" __global__ void __launch_bounds__(MT)
    indexer_scores(float* scores, const float* Q, const float* W, const int* tab, int nspans, const int* pos,
                   Paged keys, int heads, int dim, int rate, int maxE, int topk, float sscale, int ipw,
                   float wscale) { PDL_WAIT();
  DYN_SHARED(float, sm);
  const int t = blockIdx.x, n = (pos[t] + 1) / rate;
  if (n <= topk) return;
  const int perBlock = IDX_WARPS * ipw, e0 = blockIdx.y * perBlock;
  float* row = scores + (long long)t * maxE;
  const float ninf = __int_as_float(0xFF800000);
  if (e0 >= n) {
    for (int e = e0 + threadIdx.x; e < min(e0 + perBlock, maxE); e += blockDim.x) row[e] = ninf;
    return;
  }
  const Span sp = span_of(tab, nspans, t);
  const int qs = dim + 4, d4 = dim / 4, n4 = heads * d4;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* q = sm;
  float* wh = q + heads * qs;
  float* kw = wh + heads + warp * ipw * dim;                // this warp's keys, dim apart
  float* cw = wh + heads + IDX_WARPS * ipw * dim + warp * ipw * heads;  // their heads' terms
  // This warp's keys first: their page-table and slot loads in flight
  // with the queries'.
  float kv[IDX_IPW_MAX][4];
#pragma unroll
  for (int j = 0; j < IDX_IPW_MAX; ++j) {
    const int e = e0 + warp * ipw + j;
    const bool live = j < ipw && e < maxE && e < n && sp.index >= 0 && lane < d4;
    const u8* sl = live ? slot_ptr(keys, sp.index, e) : nullptr;
#pragma unroll
    for (int u = 0; u < 4; ++u) kv[j][u] = live ? slot_value(sl, keys.fmt, dim, keys.rope, 4 * lane + u) : 0.0f;
  }
  const float4* Q4 = (const float4*)(Q + (long long)t * heads * dim);
  for (int i0 = threadIdx.x; i0 < n4; i0 += 8 * blockDim.x) {
    float4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int i = i0 + u * blockDim.x;
      if (i < n4) v[u] = Q4[i];
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int i = i0 + u * blockDim.x;
      if (i < n4) *(float4*)(q + (i / d4) * qs + (i % d4) * 4) = v[u];
    }
  }
  for (int h = threadIdx.x; h < heads; h += blockDim.x) wh[h] = __fmul_rn(W[(long long)t * heads + h], wscale);
  // The warp's keys (a dead one's zeros: scored, never written).
#pragma unroll
  for (int j = 0; j < IDX_IPW_MAX; ++j)
    if (j < ipw && lane < d4) {
      float4 v;
      v.x = kv[j][0], v.y = kv[j][1], v.z = kv[j][2], v.w = kv[j][3];
      *(float4*)(kw + j * dim + 4 * lane) = v;
    }
  __syncthreads();
  for (int h = lane; h < heads; h += 32) {
    float s[IDX_IPW_MAX][4];
#pragma unroll
    for (int j = 0; j < IDX_IPW_MAX; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
    const float* qh = q + h * qs;
#pragma unroll 2
    for (int i = 0; i < dim; i += 4) {
      const float4 x = *(const float4*)(qh + i);
#pragma unroll
      for (int j = 0; j < IDX_IPW_MAX; ++j)
        if (j < ipw) {
          const float4 y = *(const float4*)(kw + j * dim + i);
          s[j][0] = __fadd_rn(s[j][0], __fmul_rn(x.x, y.x));
          s[j][1] = __fadd_rn(s[j][1], __fmul_rn(x.y, y.y));
          s[j][2] = __fadd_rn(s[j][2], __fmul_rn(x.z, y.z));
          s[j][3] = __fadd_rn(s[j][3], __fmul_rn(x.w, y.w));
        }
    }
    const float w = wh[h];
#pragma unroll
    for (int j = 0; j < IDX_IPW_MAX; ++j)
      if (j < ipw) {
        const float v = __fadd_rn(__fadd_rn(s[j][0], s[j][1]), __fadd_rn(s[j][2], s[j][3]));
        cw[j * heads + h] = v > 0.0f ? __fmul_rn(__fmul_rn(v, sscale), w) : 0.0f;
      }
  }
  __syncwarp();
  if (lane < ipw) {
    const int e = e0 + warp * ipw + lane;
    if (e < maxE) {
      if (e >= n || sp.index < 0) {
        row[e] = ninf;
      } else {
        const float* c = cw + lane * heads;
        float s = 0.0f;
#pragma unroll 4
        for (int h = 0; h < heads; h += 4) {
          const float4 cv = *(const float4*)(c + h);
          s = __fadd_rn(s, cv.x);
          s = __fadd_rn(s, cv.y);
          s = __fadd_rn(s, cv.z);
          s = __fadd_rn(s, cv.w);
        }
        row[e] = s;
      }
    }
  }
}

// indexer_scores_r25 is indexer_scores_r21 (the same scores, bit for bit) with
// its loads in flight together rather than one round trip after another:
// the token's queries in 16-byte loads, eight a thread before any is
// stored; each warp's ipw keys (lane l holds channels 4l..4l+3) before
// the first is scored; the products and the heads' sum in 16-byte shared
// loads (query rows dim + 4 apart: 16-byte aligned, and a quarter warp's
// rows on distinct banks). Run 22 (NCU_T): indexer_scores_r21 took 18.3
// us on the CSA layer at batch 1, on the indexer's lane, the layer's
// longest. The host takes it where dim <= 128, dim % 4 == 0, heads % 4 ==
// 0 and ipw <= IDX_IPW_MAX; dynamic shared memory: heads·(dim+4) + heads
// + IDX_WARPS·(dim + heads) floats.
extern "C" __global__ void __launch_bounds__(MT)
    indexer_scores_r25(float* scores, const float* Q, const float* W, const int* tab, int nspans, const int* pos,
                   Paged keys, int heads, int dim, int rate, int maxE, int topk, float sscale, int ipw,
                   float wscale) { PDL_WAIT();
  DYN_SHARED(float, sm);
  const int t = blockIdx.x, n = (pos[t] + 1) / rate;
  if (n <= topk) return;
  const int perBlock = IDX_WARPS * ipw, e0 = blockIdx.y * perBlock;
  float* row = scores + (long long)t * maxE;
  const float ninf = __int_as_float(0xFF800000);
  if (e0 >= n) {
    for (int e = e0 + threadIdx.x; e < min(e0 + perBlock, maxE); e += blockDim.x) row[e] = ninf;
    return;
  }
  const Span sp = span_of(tab, nspans, t);
  const int qs = dim + 4, d4 = dim / 4, n4 = heads * d4;
  float* q = sm;
  float* wh = q + heads * qs;
  float* kb = wh + heads;
  float* ct = kb + IDX_WARPS * dim;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // This warp's keys first: their page-table and slot loads in flight
  // with the queries'.
  float kv[IDX_IPW_MAX][4];
#pragma unroll
  for (int j = 0; j < IDX_IPW_MAX; ++j) {
    const int e = e0 + warp * ipw + j;
    const bool live = j < ipw && e < maxE && e < n && sp.index >= 0 && lane < d4;
    const u8* sl = live ? slot_ptr(keys, sp.index, e) : nullptr;
#pragma unroll
    for (int u = 0; u < 4; ++u) kv[j][u] = live ? slot_value(sl, keys.fmt, dim, keys.rope, 4 * lane + u) : 0.0f;
  }
  const float4* Q4 = (const float4*)(Q + (long long)t * heads * dim);
  for (int i0 = threadIdx.x; i0 < n4; i0 += 8 * blockDim.x) {
    float4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int i = i0 + u * blockDim.x;
      if (i < n4) v[u] = Q4[i];
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int i = i0 + u * blockDim.x;
      if (i < n4) *(float4*)(q + (i / d4) * qs + (i % d4) * 4) = v[u];
    }
  }
  for (int h = threadIdx.x; h < heads; h += blockDim.x) wh[h] = __fmul_rn(W[(long long)t * heads + h], wscale);
  __syncthreads();
  float* k = kb + warp * dim;
  float* c = ct + warp * heads;
#pragma unroll
  for (int j = 0; j < IDX_IPW_MAX; ++j) {
    const int e = e0 + warp * ipw + j;
    if (j >= ipw || e >= maxE) break;
    if (e >= n || sp.index < 0) {
      if (lane == 0) row[e] = ninf;
      continue;
    }
    if (lane < d4) {
      float4 kw;
      kw.x = kv[j][0], kw.y = kv[j][1], kw.z = kv[j][2], kw.w = kv[j][3];
      *(float4*)(k + 4 * lane) = kw;
    }
    __syncwarp();
    for (int h = lane; h < heads; h += 32) {
      const float v = dot4v(q + h * qs, k, dim);
      c[h] = v > 0.0f ? __fmul_rn(__fmul_rn(v, sscale), wh[h]) : 0.0f;
    }
    __syncwarp();
    if (lane == 0) {
      float s = 0.0f;
#pragma unroll 4
      for (int h = 0; h < heads; h += 4) {
        const float4 cv = *(const float4*)(c + h);
        s = __fadd_rn(s, cv.x);
        s = __fadd_rn(s, cv.y);
        s = __fadd_rn(s, cv.z);
        s = __fadd_rn(s, cv.w);
      }
      row[e] = s;
    }
    __syncwarp();
  }
}

// indexer_fix writes, for tokens with at most topk closed entries, all of
// them in order (then -1s), and every token's count. One block a token.
extern "C" __global__ void __launch_bounds__(MT) indexer_fix(int* sel, int* cnt, const int* pos, int rate, int topk) { PDL_WAIT();
  const int t = blockIdx.x, n = (pos[t] + 1) / rate;
  if (n <= topk) {
    for (int i = threadIdx.x; i < topk; i += blockDim.x) sel[(long long)t * topk + i] = i < n ? i : -1;
    if (threadIdx.x == 0) cnt[t] = n;
  } else if (threadIdx.x == 0) {
    cnt[t] = topk;
  }
}

// ---- cache rings ----

// store_ring writes the last size positions of every span's rows of src
// (cols wide) into ring slots p % size, in the ring's format. One block a
// row of src; rows in no span are left alone.
extern "C" __global__ void __launch_bounds__(MT) store_ring(Paged ring, int size, const float* src, int cols,
                                                            const int* tab, int nspans) { PDL_WAIT();
  __shared__ float buf[32];
  const int t = blockIdx.x;
  const Span sp = span_of(tab, nspans, t);
  if (sp.index < 0) return;
  const int p = sp.pos0 + (t - sp.start);
  if (p < max(sp.pos0, sp.pos0 + sp.n - size)) return;
  encode_row(slot_ptr(ring, sp.index, p % size), src + (long long)t * cols, ring.fmt, cols, ring.rope, buf);
}

// load_ring writes into dst[t] the ring slot of t's span at pos[t] % size.
extern "C" __global__ void __launch_bounds__(MT) load_ring(float* dst, int cols, Paged ring, int size, const int* tab,
                                                           int nspans, const int* pos) { PDL_WAIT();
  const int t = blockIdx.x;
  const Span sp = span_of(tab, nspans, t);
  if (sp.index < 0) return;
  const u8* sl = slot_ptr(ring, sp.index, pos[t] % size);
  for (int i = threadIdx.x; i < cols; i += blockDim.x) dst[(long long)t * cols + i] = slot_value(sl, ring.fmt, cols, ring.rope, i);
}

// round_trip writes each row of src as a slot of format fmt gives it back.
// Dynamic shared memory: the slot's bytes.
extern "C" __global__ void __launch_bounds__(MT) round_trip(float* dst, const float* src, int cols, int fmt, int rope) { PDL_WAIT();
  __shared__ float buf[32];
  DYN_SHARED(u8, sl);
  const long long r = blockIdx.x;
  encode_row(sl, src + r * cols, fmt, cols, rope, buf);
  for (int i = threadIdx.x; i < cols; i += blockDim.x) dst[r * cols + i] = slot_value(sl, fmt, cols, rope, i);
}

// split_bf16 writes x = hi + lo with hi = bf16(x) (round to nearest even)
// and lo = x - hi (exact), both as float32: the fast products multiply each
// on the tensor cores, whose bf16 rounding then leaves only lo's, ~2^-17 of
// x. For n values.
extern "C" __global__ void __launch_bounds__(MT) split_bf16(float* hi, float* lo, const float* x, int n) { PDL_WAIT();
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  const float h = __uint_as_float(bf16_rn(v) << 16);
  hi[i] = h;
  lo[i] = __fsub_rn(v, h);
}
