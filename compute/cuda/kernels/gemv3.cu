// gemv3.cu: variants of gemv2.cu's T = 1 product for the measurements of
// BenchmarkGEMVVariants (NOTES.md, run 4): U chunks of each of R rows in
// flight per lane, the FP8 decoder in software (d0) or hardware (d1),
// the scale bytes loaded with the chunks (p1) or after them (p0).
// Every variant gives gemv2's bits (TestGEMVVariants); the Backend uses
// gemv2's entries.

#define GEMV3_ENTRY(F, FMT, U, R, D, P, SPLIT)                                                                   \
  extern "C" __global__ void __launch_bounds__(256)                                                                \
      gemv3_##F##_u##U##_r##R##_d##D##_p##P##_s##SPLIT(float* __restrict__ y, const float* __restrict__ x,         \
                                                       const u8* __restrict__ w, const u8* __restrict__ sc,         \
                                                       int rows, int K, int T, int blockRows, int blockCols,        \
                                                       int scaleCols) { PDL_WAIT();                                             \
    gemv_rows<FMT, 1, SPLIT, U, R, D, P>(y, rows, x, K, w, sc, rows, K, T, blockRows, blockCols, scaleCols);        \
  }
#define GEMV3_SPLITS(F, FMT, U, R, D, P) \
  GEMV3_ENTRY(F, FMT, U, R, D, P, 1)     \
  GEMV3_ENTRY(F, FMT, U, R, D, P, 2)     \
  GEMV3_ENTRY(F, FMT, U, R, D, P, 4)     \
  GEMV3_ENTRY(F, FMT, U, R, D, P, 8)

// The list of kernels.go's gemvVariants.
GEMV3_SPLITS(fp8, FMT_FP8, 4, 2, 1, 0)
GEMV3_SPLITS(fp8, FMT_FP8, 4, 2, 0, 1)
GEMV3_SPLITS(fp8, FMT_FP8, 4, 2, 1, 1)
GEMV3_SPLITS(fp8, FMT_FP8, 8, 2, 1, 1)
GEMV3_SPLITS(fp8, FMT_FP8, 4, 4, 1, 1)
GEMV3_SPLITS(fp8, FMT_FP8, 4, 1, 1, 1)
GEMV3_SPLITS(fp8, FMT_FP8, 8, 1, 1, 1)
GEMV3_SPLITS(fp4, FMT_FP4, 4, 2, 0, 1)
GEMV3_SPLITS(fp4, FMT_FP4, 8, 2, 0, 1)
GEMV3_SPLITS(fp4, FMT_FP4, 4, 4, 0, 1)
GEMV3_SPLITS(fp4, FMT_FP4, 4, 1, 0, 1)
GEMV3_SPLITS(bf16, FMT_BF16, 8, 2, 0, 0)
GEMV3_SPLITS(bf16, FMT_BF16, 4, 4, 0, 0)
GEMV3_SPLITS(bf16, FMT_BF16, 4, 1, 0, 0)

// gemv4_<fmt>_u<U>_s<SPLIT>: gemv_persist (gemv_common.cuh) with 2 rows a
// warp, plain (tab null, ng 1) or grouped (ng matrices of tab); the grid is
// the host's choice (fewer blocks than row groups). gemv2's bits at the
// same split.
#define GEMV4_ENTRY(F, FMT, U, SPLIT)                                                                          \
  extern "C" __global__ void __launch_bounds__(256)                                                          \
      gemv4_##F##_u##U##_s##SPLIT(float* __restrict__ y, const float* __restrict__ x, const u8* __restrict__ w, \
                                  const u8* __restrict__ sc, const u64* __restrict__ tab, int ng, int rows,     \
                                  int K, int blockRows, int blockCols, int scaleCols) { PDL_WAIT();                         \
    gemv_persist<FMT, SPLIT, U, 2>(y, x, w, sc, tab, ng, rows, K, blockRows, blockCols, scaleCols);            \
  }
#define GEMV4_SPLITS(F, FMT, U) \
  GEMV4_ENTRY(F, FMT, U, 1)     \
  GEMV4_ENTRY(F, FMT, U, 2)     \
  GEMV4_ENTRY(F, FMT, U, 4)     \
  GEMV4_ENTRY(F, FMT, U, 8)
GEMV4_SPLITS(fp8, FMT_FP8, 2)
GEMV4_SPLITS(fp8, FMT_FP8, 4)
GEMV4_SPLITS(fp8, FMT_FP8, 8)
GEMV4_SPLITS(bf16, FMT_BF16, 2)
GEMV4_SPLITS(bf16, FMT_BF16, 4)
