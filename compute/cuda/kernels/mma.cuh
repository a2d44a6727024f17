// mma.cuh: the tensor-core primitives of the fast products (gemm.cu,
// gemmx.cu): bfloat16 m16n8k16 mma.sync and ldmatrix, with the emulator's
// versions of both.
#pragma once

// bfloat16 mma.sync and ldmatrix need sm_80; on older devices the host
// never launches this kernel, and its body traps.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define GEMM_TC 1
#endif

#ifdef STRATA_EMU
// The emulator's m16n8k16 (row.col, AT decoding a 16-bit half of bf16 or f16
// operands, f32 accumulate): every lane
// gathers the fragments of A and B through shuffles (the PTX fragment
// layouts: lane l holds A rows l/4 and l/4+8, columns 2(l%4)+{0,1,8,9};
// B columns l/4, rows 2(l%4)+{0,1,8,9}; C rows l/4, l/4+8, columns
// 2(l%4)+{0,1}) and adds the exact products in k order.
__device__ __forceinline__ float emu_bf16_at(u32 w, int half) { return __uint_as_float((half ? w >> 16 : w & 0xFFFFu) << 16); }
__device__ __forceinline__ float emu_f16_at(u32 w, int half) { return emu_f16_to_f32((unsigned short)(half ? w >> 16 : w & 0xFFFFu)); }
template <float (*AT)(u32, int)>
__device__ __forceinline__ void emu_mma16816(float* d, const u32* a, const u32* b) {
  const int lane = threadIdx.x & 31;
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, t = l & 3;
    u32 ar[4], br[2];
    for (int i = 0; i < 4; ++i) ar[i] = __shfl_sync(0xFFFFFFFFu, a[i], l);
    for (int i = 0; i < 2; ++i) br[i] = __shfl_sync(0xFFFFFFFFu, b[i], l);
    for (int h = 0; h < 2; ++h) {
      A[g][2 * t + h] = AT(ar[0], h);
      A[g + 8][2 * t + h] = AT(ar[1], h);
      A[g][2 * t + 8 + h] = AT(ar[2], h);
      A[g + 8][2 * t + 8 + h] = AT(ar[3], h);
      B[2 * t + h][g] = AT(br[0], h);
      B[2 * t + 8 + h][g] = AT(br[1], h);
    }
  }
  const int g = lane >> 2, t = lane & 3;
  for (int e = 0; e < 4; ++e) {
    const int r = g + (e >> 1) * 8, c = 2 * t + (e & 1);
    float acc = d[e];
    for (int k = 0; k < 16; ++k) acc = __fadd_rn(acc, __fmul_rn(A[r][k], B[k][c]));
    d[e] = acc;
  }
}
__device__ __forceinline__ void mma_bf16(float* d, const u32* a, const u32* b) { emu_mma16816<emu_bf16_at>(d, a, b); }

// The emulator's ldmatrix .x4: matrix j's row i comes from the address of
// lane 8j + i; lane l receives word l%4 of row l/4 of each matrix.
__device__ __forceinline__ void ldmatrix_x4(u32* r, const u16* p) {
  const int lane = threadIdx.x & 31;
  for (int j = 0; j < 4; ++j) {
    const u16* row = (const u16*)__shfl_sync(0xFFFFFFFFu, (unsigned long long)p, 8 * j + (lane >> 2));
    r[j] = ((const u32*)row)[lane & 3];
  }
}
// The emulator's ldmatrix .x4.trans: lane l receives, of each matrix j,
// the halves (row 2(l%4), column l/4) and (row 2(l%4)+1, column l/4),
// row i coming from the address of lane 8j + i.
__device__ __forceinline__ void ldmatrix_x4_trans(u32* r, const u16* p) {
  const int lane = threadIdx.x & 31;
  for (int j = 0; j < 4; ++j) {
    const u16* r0 = (const u16*)__shfl_sync(0xFFFFFFFFu, (unsigned long long)p, 8 * j + 2 * (lane & 3));
    const u16* r1 = (const u16*)__shfl_sync(0xFFFFFFFFu, (unsigned long long)p, 8 * j + 2 * (lane & 3) + 1);
    r[j] = (u32)r0[lane >> 2] | ((u32)r1[lane >> 2] << 16);
  }
}
#else
__device__ __forceinline__ void mma_bf16(float* d, const u32* a, const u32* b) {
#ifdef GEMM_TC
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}

__device__ __forceinline__ void ldmatrix_x4(u32* r, const u16* p) {
#ifdef GEMM_TC
  u32 a = (u32)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
#else
  r[0] = r[1] = r[2] = r[3] = 0;
  __trap();
#endif
}

// ldmatrix_x4_trans is ldmatrix .x4.trans: each lane receives the
// fragments of the four 8x8 matrices transposed (an mma's B fragment of a
// row-major K x N tile).
__device__ __forceinline__ void ldmatrix_x4_trans(u32* r, const u16* p) {
#ifdef GEMM_TC
  u32 a = (u32)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
#else
  r[0] = r[1] = r[2] = r[3] = 0;
  __trap();
#endif
}
#endif

__device__ __forceinline__ u32 pack2(u32 lo, u32 hi) { return (lo & 0xFFFFu) | (hi << 16); }

// gvx_dec2 decodes the e4m3 bytes 2h and 2h+1 of q, times the chunk's
// scale 2^(e-127) (sf; e its UE8M0 byte), into a bfloat16 pair (byte 2h
// low). On sm_90: each byte's bits placed as a bfloat16 of the same value
// times 2^-120 (sign at bit 15, exponent and mantissa at bits 10..4:
// e4m3's subnormals become bfloat16 subnormals), then one exact
// bfloat16x2 multiply by m2 = 2^(e-7) (two, by 2^120 and by the scale,
// where 2^(e-7) is not a bfloat16: e > 134).
__device__ __forceinline__ u32 gvx_dec2(u32 q, int h, u32 m2, u32 s2, bool two, float sf) {
#if defined(STRATA_EMU) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900)
  (void)m2;
  (void)s2;
  (void)two;
  return pack2(bf16_exact(__fmul_rn(e4m3((q >> (16 * h)) & 0xFF), sf)),
               bf16_exact(__fmul_rn(e4m3((q >> (16 * h + 8)) & 0xFF), sf)));
#else
  (void)sf;
  u32 v;  // bytes 2h, 2h+1 as the high bytes of the halves
  asm("prmt.b32 %0, %1, 0, %2;" : "=r"(v) : "r"(q), "r"(h ? 0x3424u : 0x1404u));
  u32 t = (v & 0x80008000u) | ((v >> 4) & 0x07F007F0u);
  asm("mul.rn.bf16x2 %0, %0, %1;" : "+r"(t) : "r"(m2));
  if (two) asm("mul.rn.bf16x2 %0, %0, %1;" : "+r"(t) : "r"(s2));
  return t;
#endif
}

// gvx_dec16 decodes a chunk's 16 e4m3 bytes v times its scale sf (2^(e-127),
// e its UE8M0 byte; NaN where the chunk is to decode as NaN) into the 8
// bfloat16 pairs o[j] (bytes 2j, 2j+1) by gvx_dec2: gemvx's decode, and
// gemmx's where every product is a normal bfloat16.
__device__ __forceinline__ void gvx_dec16(const uint4& v, u32 e, float sf, u32* o) {
  // m2 = 2^(e-7) = 2^120 · scale as a bfloat16 pair (exponent field
  // e + 120) when it is one (and no NaN), else 2^120, and s2 the scale
  // (or NaN) for a second multiply.
  const u32 sb = __float_as_uint(sf) >> 16, s2 = sb | (sb << 16);
  const bool two = e > 134u || sf != sf;
  const u32 mb = two ? 0x7B80u : (e + 120u) << 7, m2 = mb | (mb << 16);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const u32 wd = word_of(v, j);
    o[2 * j] = gvx_dec2(wd, 0, m2, s2, two, sf);
    o[2 * j + 1] = gvx_dec2(wd, 1, m2, s2, two, sf);
  }
}

__device__ __forceinline__ void store8(u16* dst, const u32* v) {
  uint4* p = (uint4*)dst;
  p[0] = make_uint4(v[0], v[1], v[2], v[3]);
  p[1] = make_uint4(v[4], v[5], v[6], v[7]);
}


// mma_f16 is mma_bf16 for float16 operands (m16n8k16 row.col, f16 in, f32
// accumulate; the emulator's emu_mma16816 with float16 operands).
#ifdef STRATA_EMU
__device__ __forceinline__ void mma_f16(float* d, const u32* a, const u32* b) { emu_mma16816<emu_f16_at>(d, a, b); }
#else
__device__ __forceinline__ void mma_f16(float* d, const u32* a, const u32* b) {
#ifdef GEMM_TC
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}
#endif

// f16_rn_soft returns the float16 bits nearest f (ties to even; NaN stays NaN,
// overflow goes to infinity), in software for the emulator.
__device__ __forceinline__ u32 f16_rn_soft(float f) {
  const u32 b = __float_as_uint(f), s = (b >> 16) & 0x8000u, a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return s | 0x7E00u;
  if (a >= 0x477FF000u) return s | 0x7C00u;
  if (a < 0x38800000u) {  // below 2^-14: a subnormal (or zero) of 2^-24 steps
    const float v = __fmul_rn(__uint_as_float(a), 0x1p24f);
    u32 m = (u32)v;
    const float r = __fsub_rn(v, (float)m);
    if (r > 0.5f || (r == 0.5f && (m & 1u))) ++m;
    return s | m;
  }
  u32 h = (((a >> 23) - 112u) << 10) | ((a >> 13) & 0x3FFu);
  const u32 rem = a & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return s | h;
}

// f16x2_rn packs f16(a) (low) and f16(b) (high).
__device__ __forceinline__ u32 f16x2_rn(float a, float b) {
#ifdef STRATA_EMU
  return f16_rn_soft(a) | (f16_rn_soft(b) << 16);
#else
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  return r;
#endif
}

__device__ __forceinline__ float f16_lo(u32 w) { return f16_to_f32(w & 0xFFFFu); }
__device__ __forceinline__ float f16_hi(u32 w) { return f16_to_f32(w >> 16); }
