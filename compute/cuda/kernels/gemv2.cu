// gemv2.cu: the float32 matrix-vector product for rows that allow 16-byte
// loads, organized for bandwidth: each warp owns GEMV2_ROWS rows, and
// SPLIT warps of a block share them by interleaved segments of 32 chunks,
// so that every lane keeps GEMV2_UNROLL chunks of each row in flight and
// most products need no shared memory at all.
//
// Lane l of part p of a row group reads chunks c = (j*SPLIT + p)*32 + l,
// j = 0, 1, ..., and accumulates them in that order (each chunk's
// products first, then times its scale, as in gemv.cu); the lanes' sums
// are added by a butterfly, and the SPLIT warps' in part order. The order
// depends on K, the format and SPLIT, which the host chooses from the
// matrix's shape alone: batch-invariant.
//
// The _g entries are the grouped product of compute.Linear's
// GroupedMatMul: block row y takes group g = blockIdx.y, matrix tab[g]
// (data, scale), its input from x + g·xgs (rows ldx apart) and its output
// to y + g·ygs (rows ldy apart): GroupedMatMul's column blocks (xgs = K,
// ygs = rows), or the shared expert's W1 and W3 on the same input (xgs =
// 0) into consecutive tensors.

#define GEMV2_ROWS 2
#define GEMV2_UNROLL 4

// gemv2_body is in gemv_common.cuh (gemv3.cu's variants share it).
template <int FMT, int TT, int SPLIT>
__device__ __forceinline__ void gemv2_body(float* __restrict__ y, long long ldy, const float* __restrict__ x,
                                           long long ldx, const u8* __restrict__ w, const u8* __restrict__ sc,
                                           int rows, int K, int T, int blockRows, int blockCols, int scaleCols) {
  gemv_rows<FMT, TT, SPLIT, GEMV2_UNROLL, GEMV2_ROWS, 0, 0>(y, ldy, x, ldx, w, sc, rows, K, T, blockRows, blockCols,
                                                          scaleCols);
}

#define GEMV2_ENTRY(NAME, FMT, TT, SPLIT)                                                                   \
  extern "C" __global__ void __launch_bounds__(256)                                                        \
      NAME(float* __restrict__ y, const float* __restrict__ x, const u8* __restrict__ w,                    \
           const u8* __restrict__ sc, int rows, int K, int T, int blockRows, int blockCols, int scaleCols) { PDL_OPEN_EARLY(); \
    gemv2_body<FMT, TT, SPLIT>(y, rows, x, K, w, sc, rows, K, T, blockRows, blockCols, scaleCols);         \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(256)                                                        \
      NAME##_g(float* __restrict__ y, int ldy, int ygs, const float* __restrict__ x, int ldx, int xgs,        \
               const u64* __restrict__ tab, int rows, int K, int T, int blockRows, int blockCols, int scaleCols) { PDL_OPEN_EARLY(); \
    const int g = blockIdx.y;                                                                               \
    gemv2_body<FMT, TT, SPLIT>(y + (long long)g * ygs, ldy, x + (long long)g * xgs, ldx, (const u8*)tab[2 * g], \
                               (const u8*)tab[2 * g + 1], rows, K, T, blockRows, blockCols, scaleCols);      \
  }
#define GEMV2_SPLITS(F, FMT, TT)                \
  GEMV2_ENTRY(gemv2_##F##_t##TT##_s1, FMT, TT, 1) \
  GEMV2_ENTRY(gemv2_##F##_t##TT##_s2, FMT, TT, 2) \
  GEMV2_ENTRY(gemv2_##F##_t##TT##_s4, FMT, TT, 4) \
  GEMV2_ENTRY(gemv2_##F##_t##TT##_s8, FMT, TT, 8)
#define GEMV2_ENTRIES(F, FMT) \
  GEMV2_SPLITS(F, FMT, 1)     \
  GEMV2_SPLITS(F, FMT, 2)     \
  GEMV2_SPLITS(F, FMT, 4)     \
  GEMV2_SPLITS(F, FMT, 8)

GEMV2_ENTRIES(f32, FMT_F32)
GEMV2_ENTRIES(bf16, FMT_BF16)
GEMV2_ENTRIES(f16, FMT_F16)
GEMV2_ENTRIES(fp8, FMT_FP8)
GEMV2_ENTRIES(fp4, FMT_FP4)

// gemvm_<fmt>_t<TT>_s<SPLIT>: up to 4 products of the same input x (T rows
// of K) in one grid (compute.MultiMatMul): blocks [b_j, b_{j+1}) compute
// product j (matrix w_j, scales s_j, n_j rows, output y_j of rows n_j
// apart; b_0 = 0, unused products' b_j past the grid) exactly as that
// product's own launch would: gemv2's rows (TT < 8) or gemv5's (TT = 8)
// at the split the host takes for each of them (it groups only products
// of the same split): the same bits.
template <int FMT, int TT, int SPLIT, int U, int R>
__device__ __forceinline__ void gemvm_body(const float* __restrict__ x, int K, int T, int blockRows, int blockCols,
                                           int scaleCols, float* y0, const u8* w0, const u8* s0, int n0, float* y1,
                                           const u8* w1, const u8* s1, int n1, float* y2, const u8* w2, const u8* s2,
                                           int n2, float* y3, const u8* w3, const u8* s3, int n3, int b1, int b2,
                                           int b3) {
  // The block's product from the launch's parameters alone (nothing the
  // kernel before wrote: before PDL_WAIT_LATE, like gemv2's first loads).
  int b = blockIdx.x;
  float* y = y0;
  const u8* w = w0;
  const u8* sc = s0;
  int rows = n0;
  if (b >= b3) {
    b -= b3; y = y3; w = w3; sc = s3; rows = n3;
  } else if (b >= b2) {
    b -= b2; y = y2; w = w2; sc = s2; rows = n2;
  } else if (b >= b1) {
    b -= b1; y = y1; w = w1; sc = s1; rows = n1;
  }
  gemv_rows<FMT, TT, SPLIT, U, R, 0, 0>(y, rows, x, K, w, sc, rows, K, T, blockRows, blockCols, scaleCols, b);
}

#define GEMVM_ENTRY(F, FMT, TT, SPLIT, U, R)                                                                        \
  extern "C" __global__ void __launch_bounds__(256) gemvm_##F##_t##TT##_s##SPLIT(                                    \
      const float* __restrict__ x, int K, int T, int blockRows, int blockCols, int scaleCols, float* y0,             \
      const u8* __restrict__ w0, const u8* __restrict__ s0, int n0, float* y1, const u8* __restrict__ w1,            \
      const u8* __restrict__ s1, int n1, float* y2, const u8* __restrict__ w2, const u8* __restrict__ s2, int n2,    \
      float* y3, const u8* __restrict__ w3, const u8* __restrict__ s3, int n3, int b1, int b2, int b3) {            \
    PDL_OPEN_EARLY();                                                                                                \
    gemvm_body<FMT, TT, SPLIT, U, R>(x, K, T, blockRows, blockCols, scaleCols, y0, w0, s0, n0, y1, w1, s1, n1, y2,  \
                                     w2, s2, n2, y3, w3, s3, n3, b1, b2, b3);                                        \
  }
#define GEMVM_SPLITS(F, FMT, TT, U, R) \
  GEMVM_ENTRY(F, FMT, TT, 1, U, R)     \
  GEMVM_ENTRY(F, FMT, TT, 2, U, R)     \
  GEMVM_ENTRY(F, FMT, TT, 4, U, R)     \
  GEMVM_ENTRY(F, FMT, TT, 8, U, R)
#define GEMVM_ENTRIES(F, FMT)                               \
  GEMVM_SPLITS(F, FMT, 1, GEMV2_UNROLL, GEMV2_ROWS)         \
  GEMVM_SPLITS(F, FMT, 2, GEMV2_UNROLL, GEMV2_ROWS)         \
  GEMVM_SPLITS(F, FMT, 4, GEMV2_UNROLL, GEMV2_ROWS)         \
  GEMVM_SPLITS(F, FMT, 8, 2, 4)
GEMVM_ENTRIES(bf16, FMT_BF16)
GEMVM_ENTRIES(fp8, FMT_FP8)
