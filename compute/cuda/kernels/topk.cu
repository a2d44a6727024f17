// topk.cu: the indices of the k largest values of each row, largest first,
// ties to the lower index, NaN above every number (as the CPU TopK).
//
// Every element gets a unique 64-bit key that orders as the result must:
// the float mapped to an unsigned integer that orders as the floats do
// (-0 as +0, every NaN above +Inf) in the high half, the complement of the
// index in the low half. A radix select over the keys, 8 bits a pass from
// the top, finds the prefix the k-th largest key shares with the keys
// above it; the keys at or above it are collected (exactly k of them) and
// sorted by a bitonic sort (registers and shuffles, shared memory for
// distances of a warp or more). One block per row.
//
// The histogram (topk, run 25): each lane counts into its own copy of the
// 256 bins (hist[bin][lane], lane l's copy on bank l), so the 32 atomics of
// a warp never meet on one address. Scores concentrate in a few bins (the
// top byte is sign and exponent; relu makes many scores exactly 0, and
// BenchmarkFlash's cache of zeros makes every score 0): topk_r25's
// histogram of one copy serialized a warp's 32 atomics on the same word,
// every element of every pass. The copies' sums, in lane-rotated order
// (bank-conflict free), are cleared as they are read. Each thread loads
// TOPK_U elements before it counts any (one wait on L2 for them, not one
// an element). The passes, and so the keys selected, are topk_r25's.

#define TOPK_THREADS 512
#define TOPK_MAX 1024

__device__ __forceinline__ u64 topk_key(float v, int i) {
  u32 b = __float_as_uint(v);
  if (v != v) b = 0xFFFFFFFFu;
  else if (v == 0.0f) b = 0x80000000u;  // -0 ranks as +0
  else b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return ((u64)b << 32) | (u64)(~(u32)i);
}

#define TOPK_U 8

// topk_select runs the radix select over row (n keys) for the k largest:
// on return (every thread) the keys whose masked value is >= prefix are
// exactly k. PRIV: the lane-private histogram (hist holds 256·32 words,
// zero on entry, tot 256); else run 25's one copy (hist 256 words).
template <bool PRIV>
__device__ __forceinline__ void topk_select(const float* __restrict__ row, int n, int k, u32* hist, u32* tot,
                                            u64& prefix_out, u64& mask_out) {
  __shared__ u32 s_bin, s_above;
  const int tid = threadIdx.x, lane = tid & 31;
  u64 prefix = 0, mask = 0;
  u32 need = (u32)k;
  for (int shift = 56; shift >= 0; shift -= 8) {
    if (PRIV) {
      for (int i0 = 0; i0 < n; i0 += TOPK_U * (int)blockDim.x) {
        float v[TOPK_U];
#pragma unroll
        for (int u = 0; u < TOPK_U; ++u) {
          const int i = i0 + u * (int)blockDim.x + tid;
          v[u] = i < n ? row[i] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < TOPK_U; ++u) {
          const int i = i0 + u * (int)blockDim.x + tid;
          const u64 key = topk_key(v[u], i);
          if (i < n && (key & mask) == prefix) atomicAdd(&hist[((u32)(key >> shift) & 255u) * 32u + lane], 1u);
        }
      }
      __syncthreads();
      // Bin tid/2's total: each of its two threads sums (and clears) 16
      // of the 32 copies, starting at a bin-dependent copy so that the
      // 16 bins of a warp read 16 different banks a step. TOPK_THREADS
      // is 512: one pair of threads a bin.
      {
        const int bin = tid >> 1, half = tid & 1;
        u32 sum = 0;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          u32* p = hist + bin * 32 + half * 16 + ((j + bin) & 15);
          sum += *p;
          *p = 0;
        }
        sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
        if (half == 0) tot[bin] = sum;
      }
    } else {
      for (int b = tid; b < 256; b += blockDim.x) hist[b] = 0;
      __syncthreads();
      // An atomic a key (run 22: one a bin a warp through __match_any_sync
      // made topk 20.1 us against 15.3).
      for (int i = tid; i < n; i += blockDim.x) {
        const u64 key = topk_key(row[i], i);
        if ((key & mask) == prefix) atomicAdd(&hist[(u32)(key >> shift) & 255u], 1u);
      }
    }
    __syncthreads();
    if (tid < 32) {
      // Find the bin where the count from the top reaches need: lane l
      // holds bins 255-8l down to 248-8l; a scan over the lanes gives the
      // count above each lane's bins.
      u32 loc[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        loc[j] = tot[255 - 8 * tid - j];
        sum += loc[j];
      }
      u32 inc = sum;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        u32 v = __shfl_up_sync(0xFFFFFFFFu, inc, o);
        if (tid >= o) inc += v;
      }
      const unsigned ball = __ballot_sync(0xFFFFFFFFu, inc >= need);
      if (tid == __ffs((int)ball) - 1) {
        u32 cum = inc - sum;
        int b = 255 - 8 * tid;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          b = 255 - 8 * tid - j;
          if (cum + loc[j] >= need) break;
          cum += loc[j];
        }
        s_bin = (u32)b;
        s_above = cum;
      }
    }
    __syncthreads();
    const u32 bin = s_bin, above = s_above, cnt = tot[bin];
    need -= above;
    prefix |= (u64)bin << shift;
    mask |= (u64)255 << shift;
    __syncthreads();  // everyone has read hist before the next pass clears it
    if (cnt == need) break;
  }
  prefix_out = prefix, mask_out = mask;
}

// topk_body: the select (topk_select), then the collection and the sort.
template <bool PRIV>
__device__ __forceinline__ void topk_body(int* __restrict__ idx, const float* __restrict__ x, int n, int k, u32* hist,
                                          u32* tot) {
  __shared__ u64 sel[TOPK_MAX];
  __shared__ u32 s_count;
  const float* row = x + (long long)blockIdx.x * n;
  const int tid = threadIdx.x, lane = tid & 31;
  const int iters = (n + (int)blockDim.x - 1) / (int)blockDim.x;  // the same on every thread: whole warps in the loops
  u64 prefix, mask;
  topk_select<PRIV>(row, n, k, hist, tot, prefix, mask);

  // Collect the keys whose masked value is >= prefix: exactly k.
  if (tid == 0) s_count = 0;
  int P = 1;
  while (P < k) P <<= 1;
  for (int i = tid; i < P; i += blockDim.x) sel[i] = 0;
  __syncthreads();
  // One atomic a warp (a ballot's count, then each lane's place among
  // its warp's): the order of sel is any, the sort below fixes it.
  for (int it = 0; it < iters; ++it) {
    const int i = tid + it * (int)blockDim.x;
    const u64 key = i < n ? topk_key(row[i], i) : 0;
    const bool take = i < n && (key & mask) >= prefix;
    const u32 ball = __ballot_sync(0xFFFFFFFFu, take);
    u32 base = 0;
    if (lane == 0 && ball) base = atomicAdd(&s_count, (u32)__popc(ball));
    base = __shfl_sync(0xFFFFFFFFu, base, 0);
    if (take) {
      const u32 p = base + (u32)__popc(ball & ((1u << lane) - 1u));
      if (p < (u32)k) sel[p] = key;
    }
  }
  __syncthreads();

  // Bitonic sort of sel[0, P), descending (padding 0 sorts last): element
  // i = tid + m·blockDim in a register of its thread; a compare-exchange
  // at distance under 32 through shuffles, only the others through shared
  // memory (20 barriers at P = 512 rather than 45). The keys are unique,
  // so the order, and the result, is any sort's.
  constexpr int MS = TOPK_MAX / TOPK_THREADS;
  const int ms = (P + blockDim.x - 1) / blockDim.x;  // slots in use, the same on every thread
  u64 a[MS];
#pragma unroll
  for (int m = 0; m < MS; ++m) {
    const int i = tid + m * blockDim.x;
    a[m] = m < ms && i < P ? sel[i] : 0;
  }
  for (int size = 2; size <= P; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      u64 b[MS];
      if (stride >= 32) {
        __syncthreads();  // the last stage's reads of sel are done
#pragma unroll
        for (int m = 0; m < MS; ++m) {
          const int i = tid + m * blockDim.x;
          if (m < ms && i < P) sel[i] = a[m];
        }
        __syncthreads();
#pragma unroll
        for (int m = 0; m < MS; ++m) {
          const int i = tid + m * blockDim.x;
          b[m] = m < ms && i < P ? sel[i ^ stride] : 0;
        }
      } else {
#pragma unroll
        for (int m = 0; m < MS; ++m) {
          if (m >= ms) break;  // the same m on every lane of a warp
          const u32 lo = __shfl_xor_sync(0xFFFFFFFFu, (u32)a[m], stride);
          const u32 hi = __shfl_xor_sync(0xFFFFFFFFu, (u32)(a[m] >> 32), stride);
          b[m] = ((u64)hi << 32) | lo;
        }
      }
#pragma unroll
      for (int m = 0; m < MS; ++m) {
        const int i = tid + m * blockDim.x;
        if (m < ms && i < P) {
          // The lower of a pair keeps the larger key in a descending run.
          const bool keepMax = ((i & stride) == 0) == ((i & size) == 0);
          a[m] = keepMax ? (a[m] > b[m] ? a[m] : b[m]) : (a[m] < b[m] ? a[m] : b[m]);
        }
      }
    }
  }
  int* out = idx + (long long)blockIdx.x * k;
#pragma unroll
  for (int m = 0; m < MS; ++m) {
    const int i = tid + m * blockDim.x;
    if (m < ms && i < k) out[i] = (int)(~(u32)a[m]);
  }
}

// topk: the lane-private histogram (see the top of the file).
extern "C" __global__ void __launch_bounds__(TOPK_THREADS)
    topk(int* __restrict__ idx, const float* __restrict__ x, int n, int k) { PDL_WAIT();
  __shared__ u32 hist[256 * 32];
  __shared__ u32 tot[256];
  for (int i = threadIdx.x; i < 256 * 32; i += blockDim.x) hist[i] = 0;
  __syncthreads();
  topk_body<true>(idx, x, n, k, hist, tot);
}

// topk_r25: run 25's histogram, one copy (A/B topk-r25; the same indices).
extern "C" __global__ void __launch_bounds__(TOPK_THREADS)
    topk_r25(int* __restrict__ idx, const float* __restrict__ x, int n, int k) { PDL_WAIT();
  __shared__ u32 hist[256];
  topk_body<false>(idx, x, n, k, hist, hist);
}
