// prefetch.cu: loading weights into the L2 ahead of the products that read
// them (compute.Prefetcher).

// PF_PIECE is the bytes one bulk prefetch asks for; PF_REGIONS the most
// regions one launch takes.
#define PF_PIECE 16384
#define PF_REGIONS 12

// PfRegions are a launch's regions: n16[j] 16-byte chunks at p[j] (16-byte
// aligned).
struct PfRegions {
  const u8* p[PF_REGIONS];
  int n16[PF_REGIONS];
};

// l2_prefetch asks the L2 to load the first nr regions of r. Thread i of
// the grid takes the pieces i, i + the grid's threads, ... of PF_PIECE
// bytes of each region, each through cp.async.bulk.prefetch.L2 (sm_90: the
// copy engine loads the piece, the thread holds no register or shared
// memory for it), or a prefetch.global.L2 a 128-byte line before sm_90. It
// reads and writes nothing the other kernels compute with, so it changes
// no value; the emulator does nothing.
extern "C" __global__ void __launch_bounds__(128) l2_prefetch(PfRegions r, int nr) {
  PDL_WAIT();
#ifndef STRATA_EMU
  const long long first = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * PF_PIECE;
  const long long stride = (long long)gridDim.x * blockDim.x * PF_PIECE;
  for (int j = 0; j < nr && j < PF_REGIONS; ++j) {
    const long long n = 16ll * r.n16[j];
    for (long long o = first; o < n; o += stride) {
      const unsigned sz = (unsigned)min((long long)PF_PIECE, n - o);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(r.p[j] + o), "r"(sz) : "memory");
#else
      for (unsigned b = 0; b < sz; b += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(r.p[j] + o + b));
#endif
    }
  }
#else
  (void)r;
  (void)nr;
#endif
}
