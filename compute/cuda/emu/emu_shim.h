// emu_shim.h: the CUDA built-ins the kernels use, as host C++, for the
// emulator (see README in this folder). The kernels are compiled unchanged
// with -DSTRATA_EMU -include emu_shim.h; every CUDA thread runs as a fiber,
// __syncthreads and the warp collectives switch fibers.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __CUDACC_RTC__ 1

struct dim3 { unsigned int x, y, z; };
struct uint2 { unsigned int x, y; };
struct alignas(16) uint4 { unsigned int x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };

extern "C" {
dim3* emu_thread_idx();
extern dim3 emu_block_idx, emu_block_dim, emu_grid_dim;
void* emu_dyn_shared();
void emu_syncthreads();
unsigned long long emu_warp_op(int op, unsigned long long v, int arg);
}
#define threadIdx (*emu_thread_idx())
#define blockIdx emu_block_idx
#define blockDim emu_block_dim
#define gridDim emu_grid_dim

enum { EMU_SHFL_XOR = 1, EMU_SHFL_UP = 2, EMU_SHFL_IDX = 3, EMU_SHFL_DOWN = 4, EMU_BALLOT = 5, EMU_SYNCWARP = 6 };

inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
inline uint2 make_uint2(unsigned a, unsigned b) { return uint2{a, b}; }
inline float __uint_as_float(unsigned int u) { float f; memcpy(&f, &u, 4); return f; }
inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
inline unsigned int __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dadd_rn(double a, double b) { return a + b; }
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
inline void __threadfence() {}
inline void __syncthreads() { emu_syncthreads(); }
inline void __syncwarp(unsigned = 0xFFFFFFFFu) { emu_warp_op(EMU_SYNCWARP, 0, 0); }
template <class T> inline unsigned long long emu_bits(T v) { unsigned long long b = 0; memcpy(&b, &v, sizeof(T)); return b; }
template <class T> inline T emu_from(unsigned long long b) { T v; memcpy(&v, &b, sizeof(T)); return v; }
template <class T> inline T __shfl_xor_sync(unsigned, T v, int o) { return emu_from<T>(emu_warp_op(EMU_SHFL_XOR, emu_bits(v), o)); }
template <class T> inline T __shfl_up_sync(unsigned, T v, unsigned d) { return emu_from<T>(emu_warp_op(EMU_SHFL_UP, emu_bits(v), (int)d)); }
template <class T> inline T __shfl_down_sync(unsigned, T v, unsigned d) { return emu_from<T>(emu_warp_op(EMU_SHFL_DOWN, emu_bits(v), (int)d)); }
template <class T> inline T __shfl_sync(unsigned, T v, int l) { return emu_from<T>(emu_warp_op(EMU_SHFL_IDX, emu_bits(v), l)); }
inline unsigned __ballot_sync(unsigned, int p) { return (unsigned)emu_warp_op(EMU_BALLOT, p != 0, 0); }
inline int __ffs(int x) { return __builtin_ffs(x); }
// __byte_perm: byte n of the result is byte (s >> 4n) & 7 of {y, x}
// (the selector's bit 3 ignored, as CUDA defines it).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long v = (unsigned long long)y << 32 | x;
  unsigned r = 0;
  for (int n = 0; n < 4; ++n) r |= (unsigned)((v >> (8 * ((s >> (4 * n)) & 7))) & 0xFF) << (8 * n);
  return r;
}
// __dp4a: c plus the products of the four signed bytes of a and b.
inline int __dp4a(int a, int b, int c) {
  for (int n = 0; n < 4; ++n) c += (int)(signed char)(a >> (8 * n)) * (int)(signed char)(b >> (8 * n));
  return c;
}
inline int __float2int_rn(float f) { return (int)rintf(f); }
inline float __int2float_rn(int i) { return (float)i; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline void __trap() { abort(); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p = o + v; return o; }
inline int atomicAdd(int* p, int v) { int o = *p; *p = o + v; return o; }
inline float atomicAdd(float* p, float v) { float o = *p; *p = o + v; return o; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
using std::sqrt; using std::exp; using std::log1p;
inline void sincos(double x, double* s, double* c) { *s = std::sin(x); *c = std::cos(x); }
inline float emu_f16_to_f32(unsigned short h) {
  unsigned sign = (unsigned)(h & 0x8000) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FF;
  if (e == 31) return __uint_as_float(sign | 0x7F800000u | (m << 13));
  if (e == 0) { float v = (float)m * 0x1p-24f; return __uint_as_float(sign | __float_as_uint(v)); }
  return __uint_as_float(sign | ((e + 127 - 15) << 23) | (m << 13));
}
