// moe_quant.cuh: the FP4 experts' activation quantization, shared by
// moe.cu's moeq_stage and moem.cu's moem_stage (the same integers, so
// that moeq and moem differ by float32 roundings alone).
#pragma once

// moe_block_quant takes 4 columns of a 32-column block a lane, the 8
// consecutive lanes of a block (whole warps calling): e is the exponent of
// the block's largest magnitude (at least -100), fin whether the block is
// finite (no NaN or infinity), and xi the columns rounded to integers of
// x·2^(21-e) (|xi| <= 2^22; 0 when not fin).
__device__ __forceinline__ void moe_block_quant(const float (&f)[4], int (&xi)[4], int& e, bool& fin) {
  u32 m = 0;  // the block's largest magnitude as bits (NaN above infinity above every number)
#pragma unroll
  for (int i = 0; i < 4; ++i) m = max(m, __float_as_uint(f[i]) & 0x7FFFFFFFu);
#pragma unroll
  for (int o = 1; o < 8; o <<= 1) m = max(m, (u32)__shfl_xor_sync(0xFFFFFFFFu, (int)m, o));
  fin = m < 0x7F800000u;
  e = max((int)(m >> 23) - 127, -100);
  const float S = __uint_as_float((u32)(21 - e + 127) << 23);  // |x·S| <= 2^22
#pragma unroll
  for (int i = 0; i < 4; ++i) xi[i] = fin ? __float2int_rn(__fmul_rn(f[i], S)) : 0;
}
