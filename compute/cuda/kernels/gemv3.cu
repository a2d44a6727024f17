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


// gemv5_<fmt>_t8_s<SPLIT> (and _g, grouped as gemv2's): gemv2's product 8
// tokens a pass with 4 rows a warp (2 chunks of each in flight) instead of
// 2, so that each activation load serves twice the rows (batch 8: the
// output head, the FP8 projections). The same bits as gemv2's entry of the
// same split (the host takes gemv2's split for the shape).
#define GEMV5_ENTRY(F, FMT, SPLIT)                                                                                 \
  extern "C" __global__ void __launch_bounds__(256)                                                              \
      gemv5_##F##_t8_s##SPLIT(float* __restrict__ y, const float* __restrict__ x, const u8* __restrict__ w,        \
                              const u8* __restrict__ sc, int rows, int K, int T, int blockRows, int blockCols,     \
                              int scaleCols) { PDL_OPEN_EARLY();                                                    \
    gemv_rows<FMT, 8, SPLIT, 2, 4, 0, 0>(y, rows, x, K, w, sc, rows, K, T, blockRows, blockCols, scaleCols);         \
  }                                                                                                                \
  extern "C" __global__ void __launch_bounds__(256)                                                              \
      gemv5_##F##_t8_s##SPLIT##_g(float* __restrict__ y, int ldy, int ygs, const float* __restrict__ x, int ldx,   \
                                  int xgs, const u64* __restrict__ tab, int rows, int K, int T, int blockRows,    \
                                  int blockCols, int scaleCols) { PDL_OPEN_EARLY();                                \
    const int g = blockIdx.y;                                                                                      \
    gemv_rows<FMT, 8, SPLIT, 2, 4, 0, 0>(y + (long long)g * ygs, ldy, x + (long long)g * xgs, ldx,                  \
                                         (const u8*)tab[2 * g], (const u8*)tab[2 * g + 1], rows, K, T, blockRows,   \
                                         blockCols, scaleCols);                                                    \
  }
#define GEMV5_SPLITS(F, FMT) \
  GEMV5_ENTRY(F, FMT, 1)     \
  GEMV5_ENTRY(F, FMT, 2)     \
  GEMV5_ENTRY(F, FMT, 4)     \
  GEMV5_ENTRY(F, FMT, 8)
GEMV5_SPLITS(bf16, FMT_BF16)
GEMV5_SPLITS(fp8, FMT_FP8)
