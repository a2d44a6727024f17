// clang_shim.h: declarations of the CUDA built-ins the kernels use, for a
// syntax check with clang on machines without the CUDA toolkit (see
// check.sh). NVRTC never sees this file: it is not embedded, and it is
// included only through clang's -include.
#if defined(__clang__) && !defined(__CUDACC_RTC__)
#pragma once
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __align__(n) __attribute__((aligned(n)))

struct uint2 { unsigned int x, y; };
struct __attribute__((aligned(16))) uint4 { unsigned int x, y, z, w; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct dim3 { unsigned int x, y, z; };
extern const __device__ dim3 threadIdx, blockIdx, blockDim, gridDim;

__device__ uint4 make_uint4(unsigned int, unsigned int, unsigned int, unsigned int);
__device__ uint2 make_uint2(unsigned int, unsigned int);
__device__ float __uint_as_float(unsigned int);
__device__ float __int_as_float(int);
__device__ unsigned int __float_as_uint(float);
__device__ float __fmaf_rn(float, float, float);
__device__ float __fadd_rn(float, float);
__device__ float __fsub_rn(float, float);
__device__ float __fmul_rn(float, float);
__device__ float __fdiv_rn(float, float);
__device__ double __dadd_rn(double, double);
__device__ float __shfl_xor_sync(unsigned int, float, int);
__device__ double __shfl_xor_sync(unsigned int, double, int);
__device__ unsigned int __shfl_xor_sync(unsigned int, unsigned int, int);
__device__ void __syncthreads();
__device__ long long clock64();
__device__ unsigned int __shfl_up_sync(unsigned int, unsigned int, unsigned int);
__device__ unsigned int __ballot_sync(unsigned int, int);
__device__ int __ffs(int);
__device__ int __popc(unsigned int);
__device__ unsigned int __byte_perm(unsigned int, unsigned int, unsigned int);
__device__ int __dp4a(int, int, int);
__device__ int __float2int_rn(float);
__device__ float __int2float_rn(int);
__device__ void __trap();
__device__ unsigned int atomicAdd(unsigned int*, unsigned int);
__device__ unsigned long long __cvta_generic_to_shared(const void*);
__device__ float __ldg(const float*);
__device__ unsigned char __ldg(const unsigned char*);
__device__ unsigned short __ldg(const unsigned short*);
__device__ uint2 __ldg(const uint2*);
__device__ uint4 __ldg(const uint4*);
__device__ float4 __ldg(const float4*);
__device__ float __ldcg(const float*);
__device__ int __ldcg(const int*);
__device__ uint4 __ldcg(const uint4*);
__device__ float4 __ldcg(const float4*);
__device__ void __threadfence();
__device__ void __nanosleep(unsigned);
__device__ int min(int, int);
__device__ long long min(long long, long long);
__device__ double sqrt(double);
__device__ double exp(double);
__device__ void sincos(double, double*, double*);
__device__ float rintf(float);
__device__ float fabsf(float);
__device__ float fminf(float, float);
__device__ float fmaxf(float, float);
__device__ double log1p(double);
__device__ int max(int, int);
__device__ void __syncwarp(unsigned int mask = 0xFFFFFFFFu);
__device__ int __shfl_xor_sync(unsigned int, int, int);
__device__ float __shfl_sync(unsigned int, float, int);
__device__ unsigned int __shfl_sync(unsigned int, unsigned int, int);
__device__ int __shfl_up_sync(unsigned int, int, unsigned int);
#endif
