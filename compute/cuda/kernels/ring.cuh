// ring.cuh: the copies behind the shared-memory rings of gemvp.cu,
// gemvh.cu, gemvx.cu's gemvxp_body and moe.cu's moep_body: each thread copies
// 16-byte chunks of global memory into its own slots (cp.async, no register held while a copy is in flight) and later
// reads only those slots, after waiting for its own older copy groups,
// so no barrier orders a ring. The emulator copies at once.
#pragma once

#ifdef STRATA_EMU
__device__ __forceinline__ void ring_copy16(uint4* dst, const void* src) { *dst = *(const uint4*)src; }
__device__ __forceinline__ void ring_copy4(u32* dst, const void* src) { *dst = *(const u32*)src; }
__device__ __forceinline__ void ring_commit() {}
template <int N>
__device__ __forceinline__ void ring_wait() {}
#else
__device__ __forceinline__ void ring_copy16(uint4* dst, const void* src) {
  const u32 d = (u32)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
// ring_copy4 is ring_copy16 for 4 bytes (4-byte aligned at both ends).
__device__ __forceinline__ void ring_copy4(u32* dst, const void* src) {
  const u32 d = (u32)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
}
// ring_commit closes this thread's copies since the last one into a group.
__device__ __forceinline__ void ring_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// ring_wait waits until at most N of this thread's groups are pending.
template <int N>
__device__ __forceinline__ void ring_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#endif

// ring_prefetch asks the L2 for n bytes at p (16-byte aligned, n a
// multiple of 16) in pieces of 16 KB over the calling warp's lanes
// (cp.async.bulk.prefetch.L2: the copy engine loads them, no register or
// shared memory is held): gemvp.cu's and moe.cu's prefetches (run 29,
// off). It changes no value; the emulator does nothing.
__device__ __forceinline__ void ring_prefetch(const u8* p, long long n) {
#if !defined(STRATA_EMU) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  for (long long o = 16384ll * (threadIdx.x & 31); o < n; o += 32 * 16384ll)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + o), "r"((unsigned)min(16384ll, n - o))
                 : "memory");
#else
  (void)p, (void)n;
#endif
}

// gemvp_cursor walks a persistent block's tasks in order (gemvp.cu,
// gemvh.cu): unit i of the block (block b of group g's matrix), step of it. No divisions: the
// cursors advance by additions (b by the grid, wrapping into g).
struct gemvp_cursor {
  int i, step, b, g;
};

__device__ __forceinline__ void gemvp_next(gemvp_cursor& c, int steps, int units) {
  if (++c.step == steps) {
    c.step = 0;
    ++c.i;
    c.b += gridDim.x;
    while (c.b >= units) {
      c.b -= units;
      ++c.g;
    }
  }
}
