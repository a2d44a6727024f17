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
// topk reads the row from memory in each pass; topk_reg (rows of at most
// TOPK_REGS·TOPK_THREADS) reads it once into registers, element
// tid + r·blockDim in v[r], and every pass and the collection read those:
// run 25 call 3 had topk at 46 us over the indexer's 16640 scores (64K
// context) with the row's loads and the histogram's atomics one after
// another in each pass (the host takes topk_reg past 4096 entries and
// topk_reg4 up to 2048: topkRegPays). topk_reg also skips the passes over index bytes
// no i < n sets. Both select the same keys and sort them alike: the same
// output.

#define TOPK_THREADS 512
#define TOPK_MAX 1024
#define TOPK_REGS 36  // topk_reg: rows up to 18432 (the indexer's at 64K context: 16640)

__device__ __forceinline__ u64 topk_key(float v, int i) {
  u32 b = __float_as_uint(v);
  if (v != v) b = 0xFFFFFFFFu;
  else if (v == 0.0f) b = 0x80000000u;  // -0 ranks as +0
  else b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return ((u64)b << 32) | (u64)(~(u32)i);
}

// topk_body is both kernels: R = 0 reads row[i] in every pass, R > 0
// holds the row in v (n <= R·blockDim).
template <int R>
__device__ __forceinline__ void topk_body(int* __restrict__ idx, const float* __restrict__ x, int n, int k) {
  __shared__ u32 hist[256];
  __shared__ u64 sel[TOPK_MAX];
  __shared__ u32 s_bin, s_above, s_count;
  const float* row = x + (long long)blockIdx.x * n;
  const int tid = threadIdx.x, lane = tid & 31;
  const int iters = (n + (int)blockDim.x - 1) / (int)blockDim.x;  // the same on every thread: whole warps in the loops
  // R > 0: every element of this thread, all loads in flight at once.
  float v[R > 0 ? R : 1];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int i = tid + r * (int)blockDim.x;
    v[r] = i < n ? row[i] : 0.0f;
  }

  u64 prefix = 0, mask = 0;
  u32 need = (u32)k;
  for (int shift = 56; shift >= 0; shift -= 8) {
    // topk_reg: an index byte that is 0 for every i < n is 0xFF in every
    // key (~i), so its pass would pick bin 255 with none above: taken
    // without one (rows of tied scores, such as BenchmarkFlash's zeros,
    // reach the index bytes; at most 65536 entries skip two of four).
    if (R > 0 && shift < 32 && ((u32)(n - 1) >> shift) == 0) {
      prefix |= (u64)255 << shift;
      mask |= (u64)255 << shift;
      continue;
    }
    for (int b = tid; b < 256; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    // An atomic a key (run 22: one a bin a warp through __match_any_sync
    // made topk 20.1 us against 15.3).
    if constexpr (R > 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r >= iters) break;  // the same r on every thread
        const int i = tid + r * (int)blockDim.x;
        const u64 key = topk_key(v[r], i);
        if (i < n && (key & mask) == prefix) atomicAdd(&hist[(u32)(key >> shift) & 255u], 1u);
      }
    } else {
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
        loc[j] = hist[255 - 8 * tid - j];
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
    const u32 bin = s_bin, above = s_above, cnt = hist[bin];
    need -= above;
    prefix |= (u64)bin << shift;
    mask |= (u64)255 << shift;
    __syncthreads();  // everyone has read hist before the next pass clears it
    if (cnt == need) break;
  }

  // Collect the keys whose masked value is >= prefix: exactly k.
  if (tid == 0) s_count = 0;
  int P = 1;
  while (P < k) P <<= 1;
  for (int i = tid; i < P; i += blockDim.x) sel[i] = 0;
  __syncthreads();
  // One atomic a warp (a ballot's count, then each lane's place among
  // its warp's): the order of sel is any, the sort below fixes it.
  auto collect = [&](int it, float val) {
    const int i = tid + it * (int)blockDim.x;
    const u64 key = i < n ? topk_key(val, i) : 0;
    const bool take = i < n && (key & mask) >= prefix;
    const u32 ball = __ballot_sync(0xFFFFFFFFu, take);
    u32 base = 0;
    if (lane == 0 && ball) base = atomicAdd(&s_count, (u32)__popc(ball));
    base = __shfl_sync(0xFFFFFFFFu, base, 0);
    if (take) {
      const u32 p = base + (u32)__popc(ball & ((1u << lane) - 1u));
      if (p < (u32)k) sel[p] = key;
    }
  };
  if constexpr (R > 0) {
#pragma unroll
    for (int it = 0; it < R; ++it) {
      if (it >= iters) break;  // the same it on every thread: whole warps
      collect(it, v[it]);
    }
  } else {
    for (int it = 0; it < iters; ++it) {
      const int i = tid + it * (int)blockDim.x;
      collect(it, i < n ? row[i] : 0.0f);
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

extern "C" __global__ void __launch_bounds__(TOPK_THREADS)
    topk(int* __restrict__ idx, const float* __restrict__ x, int n, int k) { PDL_WAIT();
  topk_body<0>(idx, x, n, k);
}

extern "C" __global__ void __launch_bounds__(TOPK_THREADS)
    topk_reg(int* __restrict__ idx, const float* __restrict__ x, int n, int k) { PDL_WAIT();
  topk_body<TOPK_REGS>(idx, x, n, k);
}

// topk_reg4 is topk_reg for rows of at most 4·TOPK_THREADS (2048: the
// indexer's 1280 at 4K context), without topk_reg's 36 loads.
extern "C" __global__ void __launch_bounds__(TOPK_THREADS)
    topk_reg4(int* __restrict__ idx, const float* __restrict__ x, int n, int k) { PDL_WAIT();
  topk_body<4>(idx, x, n, k);
}

// topk_sel_body is IndexerSelect's top-k and indexer_fix (model.cu) in one
// launch, their output exactly: token t = blockIdx.x with n = (pos[t] +
// 1) / rate closed entries takes topk_body's k, or all of them when n <= k
// (sel = 0 .. n-1, then -1, written over topk_body's by the same threads
// at the same places, after it), and cnt[t] = min(n, k). pos is read
// before the selection and used after it: no wait on it first. Run 19: a
// launch on the critical path whose work is a few instructions a value
// costs the step more than that work does in the kernel before it.
template <int R>
__device__ __forceinline__ void topk_sel_body(int* __restrict__ idx, const float* __restrict__ x, int n, int k,
                                              int* __restrict__ cnt, const int* __restrict__ pos, int rate) {
  const int t = blockIdx.x, nt = (pos[t] + 1) / rate;
  topk_body<R>(idx, x, n, k);
  if (nt <= k)
    for (int i = threadIdx.x; i < k; i += blockDim.x) idx[(long long)t * k + i] = i < nt ? i : -1;
  if (threadIdx.x == 0) cnt[t] = min(nt, k);
}

// topk_sel, topk_reg_sel and topk_reg4_sel: topk_sel_body on each of
// topk's forms (Backend.topkFix; A/B topk-fix).
#define TOPK_SEL_ENTRY(NAME, R)                                                                                  \
  extern "C" __global__ void __launch_bounds__(TOPK_THREADS)                                                    \
      NAME(int* __restrict__ idx, const float* __restrict__ x, int n, int k, int* __restrict__ cnt,             \
           const int* __restrict__ pos, int rate) {                                                              \
    PDL_WAIT();                                                                                                  \
    topk_sel_body<R>(idx, x, n, k, cnt, pos, rate);                                                              \
  }
TOPK_SEL_ENTRY(topk_sel, 0)
TOPK_SEL_ENTRY(topk_reg_sel, TOPK_REGS)
TOPK_SEL_ENTRY(topk_reg4_sel, 4)
