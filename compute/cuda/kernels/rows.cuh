// rows.cuh: the block reductions and the RMS norm's register path that
// rows.cu's kernels and model.cu's hc_post_pre share (the same sums in the
// same order: hc_post_pre's norm has rmsnorm's bits), and hc_seg_sum,
// which model.cu's mixing and attn.cu's combine share.

#define ROW_THREADS 256

// block_sum returns, on every thread, the sum of v over the block in a
// fixed order (butterfly in each warp, then the warps in order).
__device__ __forceinline__ float block_sum(float v, float* buf) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  float s = buf[0];
  for (int j = 1; j < (int)(blockDim.x >> 5); ++j) s = __fadd_rn(s, buf[j]);
  return s;
}

__device__ __forceinline__ double block_sum_f64(double v, double* buf) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum_f64(v);
  __syncthreads();
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  double s = buf[0];
  for (int j = 1; j < (int)(blockDim.x >> 5); ++j) s = __dadd_rn(s, buf[j]);
  return s;
}

__device__ __forceinline__ float block_nanmax(float v, float* buf) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = nanmax(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  __syncthreads();
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  float m = buf[0];
  for (int j = 1; j < (int)(blockDim.x >> 5); ++j) m = nanmax(m, buf[j]);
  return m;
}

// RMS_REGS: rows of at most RMS_REGS·blockDim values stay in registers
// between rmsnorm's two passes (its loads all in flight at once; the same
// sums in the same order as the loop below).
#define RMS_REGS 16

// rms_load loads the row x[base, base + n) and w (1 where null) into v and
// wv, thread tid's elements tid + m·blockDim (a row of at most
// RMS_REGS·blockDim values).
__device__ __forceinline__ void rms_load(float (&v)[RMS_REGS], float (&wv)[RMS_REGS], const float* x,
                                         const float* __restrict__ w, long long base, int n) {
#pragma unroll
  for (int m = 0; m < RMS_REGS; ++m) {
    const int i = threadIdx.x + m * blockDim.x;
    v[m] = i < n ? x[base + i] : 0.0f;
    wv[m] = (w && i < n) ? w[i] : 1.0f;
  }
}

// rms_factor returns r = float32(1/sqrt(float64(ss/n + eps))) of the row
// rms_load left in v, ss its float32 sum of squares (each thread's in
// order, then block_sum); every thread of the block calls it.
__device__ __forceinline__ float rms_factor(const float (&v)[RMS_REGS], int n, float eps, float* buf) {
  float ss = 0.0f;
#pragma unroll
  for (int m = 0; m < RMS_REGS; ++m)
    if (threadIdx.x + m * blockDim.x < n) ss = __fmaf_rn(v[m], v[m], ss);
  ss = block_sum(ss, buf);
  return (float)(1.0 / sqrt((double)__fadd_rn(__fdiv_rn(ss, (float)n), eps)));
}

// hc_seg_sum returns Σ_s p[s·stride] for s = 0..S-1 in order, 8 loads in
// flight at a time.
__device__ __forceinline__ float hc_seg_sum(const float* p, int S, int stride) {
  float v = 0.0f;
  for (int s0 = 0; s0 < S; s0 += 8) {
    float b[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) b[u] = s0 + u < S ? p[(long long)(s0 + u) * stride] : 0.0f;
#pragma unroll
    for (int u = 0; u < 8; ++u)
      if (s0 + u < S) v = __fadd_rn(v, b[u]);
  }
  return v;
}
