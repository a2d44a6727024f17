// rows.cu: row-wise operations, one block per row, computed as the CPU
// backend computes them (float32, float64 where the CPU uses float64), up
// to the order of the float32 sum in RMSNorm. Each row's reduction order
// depends only on its width: batch-invariant.

// ROW_THREADS, block_sum, rms_load and rms_factor are in rows.cuh (model.cu
// ends mHC pre with the same RMS norm).

// rmsnorm: y[t] = w ⊙ (x[t] · r), r = float32(1/sqrt(float64(ss/n + eps))),
// ss the float32 sum of squares; w may be null; y may be x.
extern "C" __global__ void __launch_bounds__(ROW_THREADS)
    rmsnorm(float* y, const float* x, const float* __restrict__ w, int n, float eps) { PDL_WAIT();
  __shared__ float buf[32];
  const long long base = (long long)blockIdx.x * n;
  const int nt = blockDim.x;
  if (n <= RMS_REGS * nt) {
    float v[RMS_REGS], wv[RMS_REGS];
    rms_load(v, wv, x, w, base, n);
    const float r = rms_factor(v, n, eps, buf);
#pragma unroll
    for (int m = 0; m < RMS_REGS; ++m) {
      const int i = threadIdx.x + m * nt;
      if (i < n) {
        const float u = __fmul_rn(v[m], r);
        y[base + i] = w ? __fmul_rn(wv[m], u) : u;
      }
    }
    return;
  }
  float ss = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float v = x[base + i];
    ss = __fmaf_rn(v, v, ss);
  }
  ss = block_sum(ss, buf);
  const float mean = __fdiv_rn(ss, (float)n);
  const float r = (float)(1.0 / sqrt((double)__fadd_rn(mean, eps)));
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float v = __fmul_rn(x[base + i], r);
    y[base + i] = w ? __fmul_rn(w[i], v) : v;
  }
}

// rmsnorm_rope is rmsnorm of each row of width n (in place or not)
// followed by rope_heads' turn of its last 2·nf channels by pos[r /
// heads]·invFreq: the same operations as the two kernels, so the same
// bits. Rows of at most RMS_REGS·blockDim values; each pair's cosine and
// sine are computed while the row loads. Dynamic shared memory: 2·nf
// floats (the normalized channels that turn).
extern "C" __global__ void __launch_bounds__(ROW_THREADS)
    rmsnorm_rope(float* y, const float* x, const float* __restrict__ w, int n, float eps, const int* __restrict__ pos,
                 int heads, const float* __restrict__ invFreq, int nf) { PDL_WAIT();
  __shared__ float buf[32];
  DYN_SHARED(float, tail);
  const long long base = (long long)blockIdx.x * n;
  const int nt = blockDim.x, tid = threadIdx.x, n0 = n - 2 * nf;
  float v[RMS_REGS], wv[RMS_REGS];
  rms_load(v, wv, x, w, base, n);
  float c = 0.0f, sn = 0.0f;  // pair tid's turn (rope_heads': one pair a thread)
  if (tid < nf) rope_cs(pos[blockIdx.x / heads], invFreq[tid], false, &c, &sn);
  const float r = rms_factor(v, n, eps, buf);
#pragma unroll
  for (int m = 0; m < RMS_REGS; ++m) {
    const int i = tid + m * nt;
    if (i < n) {
      const float u = __fmul_rn(v[m], r);
      const float o = w ? __fmul_rn(wv[m], u) : u;
      if (i >= n0)
        tail[i - n0] = o;
      else
        y[base + i] = o;
    }
  }
  __syncthreads();
  if (tid < nf) rope_turn(tail[2 * tid], tail[2 * tid + 1], c, sn, &y[base + n0 + 2 * tid], &y[base + n0 + 2 * tid + 1]);
}

// rope rotates the interleaved pairs of the last 2*nf channels of each of
// the T rows of width n by pos[t]*invFreq[i] (a float32 product, its cosine
// and sine in float64 rounded to float32), by the negative angle if inverse.
// One thread per pair; grid (T, ceil(nf/256)).
extern "C" __global__ void __launch_bounds__(ROW_THREADS)
    rope(float* x, int n, const int* __restrict__ pos, const float* __restrict__ invFreq, int nf, int inverse) { PDL_WAIT();
  const int i = blockIdx.y * blockDim.x + threadIdx.x;
  if (i >= nf) return;
  float c, s;
  rope_cs(pos[blockIdx.x], invFreq[i], inverse, &c, &s);
  float* p = x + (long long)blockIdx.x * n + (n - 2 * nf) + 2 * i;
  rope_turn(p[0], p[1], c, s, &p[0], &p[1]);
}

// softmax replaces each row of width n by exp(x - max) / sum, the
// exponentials and their sum in float64 as on the CPU; a row whose maximum
// is +Inf, NaN or -Inf becomes NaN. Up to 1024 threads a row: the float64
// exponentials are slow, and rows (a vocabulary) are few and long.
extern "C" __global__ void __launch_bounds__(1024) softmax(float* x, int n) { PDL_WAIT();
  __shared__ double dbuf[32];
  __shared__ float fbuf[32];
  float* row = x + (long long)blockIdx.x * n;
  float m = __int_as_float(0xFF800000);  // -Inf
  for (int i = threadIdx.x; i < n; i += blockDim.x) m = nanmax(m, row[i]);
  m = block_nanmax(m, fbuf);
  if (m == __int_as_float(0xFF800000)) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) row[i] = __uint_as_float(QNAN_BITS);
    return;
  }
  double sum = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    double e = exp((double)row[i] - (double)m);
    row[i] = (float)e;
    sum += e;
  }
  sum = block_sum_f64(sum, dbuf);
  const double inv = 1.0 / sum;
  for (int i = threadIdx.x; i < n; i += blockDim.x) row[i] = (float)((double)row[i] * inv);
}

// gather copies rows: y[i] = x[idx[i]] for rows of width n; an index < 0
// gives a row of zeros (padding), one >= rows a row of NaN (a caller's bug
// made visible). Grid (m, ceil(n/256)).
extern "C" __global__ void __launch_bounds__(ROW_THREADS)
    gather(float* __restrict__ y, const float* __restrict__ x, int rows, int n, const int* __restrict__ idx) { PDL_WAIT();
  const int j = blockIdx.y * blockDim.x + threadIdx.x;
  if (j >= n) return;
  const int i = blockIdx.x;
  const int r = idx[i];
  float v = 0.0f;
  if (r >= rows) v = __uint_as_float(QNAN_BITS);
  else if (r >= 0) v = x[(long long)r * n + j];
  y[(long long)i * n + j] = v;
}

// empty does nothing: the launch-overhead benchmark's kernel.
extern "C" __global__ void empty(int) { PDL_WAIT();}
