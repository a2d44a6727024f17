// attn.cu: sparse attention with sinks over a token's keys (the window's
// positions, then the compressed entries: the indexer's selection or all
// closed ones), each key also its value (K = V), computed as the CPU
// backend computes it: float32 products in fixed orders, float64
// exponentials rounded to float32. Every output depends only on its own
// token's keys and on the shapes: batch-invariant.

#define MT 256

// ---- sparse attention ----

// key_value returns channel i of key j (kind 0: a row of this step's KV,
// 1: a window slot, 2: a compressed entry).
__device__ __forceinline__ float key_value(const u8* p, int kind, const Paged& win, const Paged& comp, int dim, int i) {
  if (kind == 0) return ((const float*)p)[i];
  if (kind == 1) return slot_value(p, win.fmt, dim, win.rope, i);
  return slot_value(p, comp.fmt, dim, comp.rope, i);
}

// attention computes one token's output for one head over its keys (the
// window's positions, then the compressed entries: Sel's or all closed
// ones), each key also its value, with the head's sink in the softmax
// denominator. Grid (T, heads); dynamic shared memory: maxKeys·(8+4+4) +
// 4·dim bytes.
extern "C" __global__ void __launch_bounds__(MT)
    attention(float* out, const float* Q, const float* KV, const int* tab, int nspans, const int* pos, Paged win,
              int winSize, Paged comp, int hasComp, int rate, const int* sel, const int* cnt, int selK,
              const float* sink, int heads, int dim, float scale, int maxKeys) { PDL_WAIT();
  __shared__ float buf[32];
  DYN_SHARED(u8, sm);
  const u8** kp = (const u8**)sm;
  float* lg = (float*)(sm + 8ll * maxKeys);
  int* kind = (int*)(sm + 12ll * maxKeys);
  float* qv = (float*)(sm + 16ll * maxKeys);
  const int t = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, nt = blockDim.x;
  const Span sp = span_of(tab, nspans, t);
  float* o = out + ((long long)t * heads + h) * dim;
  const int p = pos[t];
  const int kw0 = max(0, p - winSize + 1), nw = p - kw0 + 1;
  int nc = 0;
  if (hasComp) nc = sel ? cnt[t] : (p + 1) / rate;
  const int nk = nw + nc;
  if (sp.index < 0 || nk > maxKeys) {
    for (int i = tid; i < dim; i += nt) o[i] = __uint_as_float(QNAN_BITS);
    return;
  }
  for (int j = tid; j < nk; j += nt) {
    if (j < nw) {
      const int kpos = kw0 + j;
      if (kpos >= sp.pos0) {
        kp[j] = (const u8*)(KV + (long long)(sp.start + kpos - sp.pos0) * dim);
        kind[j] = 0;
      } else {
        kp[j] = slot_ptr(win, sp.index, kpos % winSize);
        kind[j] = 1;
      }
    } else {
      const int c = j - nw;
      kp[j] = slot_ptr(comp, sp.index, sel ? sel[(long long)t * selK + c] : c);
      kind[j] = 2;
    }
  }
  for (int i = tid; i < dim; i += nt) qv[i] = Q[((long long)t * heads + h) * dim + i];
  __syncthreads();
  const int lane = tid & 31, warp = tid >> 5, nwarps = nt >> 5;
  for (int j = warp; j < nk; j += nwarps) {
    float acc = 0.0f;
    for (int i = lane; i < dim; i += 32) acc = __fmaf_rn(qv[i], key_value(kp[j], kind[j], win, comp, dim, i), acc);
    acc = warp_sum(acc);
    if (lane == 0) lg[j] = __fmul_rn(acc, scale);
  }
  __syncthreads();
  const float sk = sink[h];
  float mx = sk;
  for (int j = tid; j < nk; j += nt) mx = fmaxf(mx, lg[j]);
  mx = block_reduce_max(mx, buf);
  float part = 0.0f;
  for (int j = tid; j < nk; j += nt) {
    const float e = exp_f(__fsub_rn(lg[j], mx));
    lg[j] = e;
    part = __fadd_rn(part, e);
  }
  const float den = __fadd_rn(exp_f(__fsub_rn(sk, mx)), bsum(part, buf));
  for (int j = tid; j < nk; j += nt) lg[j] = __fdiv_rn(lg[j], den);
  __syncthreads();
  for (int i = tid; i < dim; i += nt) {
    float acc = 0.0f;
    for (int j = 0; j < nk; ++j) acc = __fadd_rn(acc, __fmul_rn(lg[j], key_value(kp[j], kind[j], win, comp, dim, i)));
    o[i] = acc;
  }
}

// ---- sparse attention split over the keys (flash-decoding) ----
//
// The same function as attention, in three kernels that split each
// token's keys into chunks of ATT_KC (key j is in chunk j / ATT_KC,
// whatever the launch), so that small batches fill the GPU:
//   attn_logits: the logits of one chunk for HG heads (the same dot
//     products, in the same order, as attention's);
//   attn_values: per head the maximum M over all the token's logits and
//     the sink, then per chunk s the sums l_s = Σ_j exp(l_j - M) and o_s =
//     Σ_j exp(l_j - M)·v_j (keys in order); with split, one block a chunk
//     writes them for attn_combine; without, one block adds the chunks in
//     order itself;
//   attn_combine: out = (Σ_s o_s) / (exp(sink - M) + Σ_s l_s), the chunks
//     in order.
// Both ways add the same chunk sums in the same order, so a token's
// output depends on its own keys alone (not on the split, the batch or
// the keys' capacity): batch-invariant.

#define ATT_KC 32
#define ATT_MAXV 4  // dims per thread in attn_values: dim <= 4·MT

struct AttnTok {
  Span sp;
  int kw0, nw, nk;
  bool bad;
};

__device__ __forceinline__ AttnTok attn_tok(const int* tab, int nspans, const int* pos, int t, int winSize,
                                            int hasComp, int rate, const int* sel, const int* cnt, int maxKeys) {
  AttnTok a;
  a.sp = span_of(tab, nspans, t);
  const int p = pos[t];
  a.kw0 = max(0, p - winSize + 1);
  a.nw = p - a.kw0 + 1;
  int nc = 0;
  if (hasComp) nc = sel ? cnt[t] : (p + 1) / rate;
  a.nk = a.nw + nc;
  a.bad = a.sp.index < 0 || a.nk > maxKeys;
  return a;
}

// attn_key_ptr returns key j of token t (and its kind, as attention's).
__device__ __forceinline__ const u8* attn_key_ptr(const AttnTok& a, int t, int j, const float* KV, int dim,
                                                  const Paged& win, int winSize, const Paged& comp, const int* sel,
                                                  int selK, int* kind) {
  if (j < a.nw) {
    const int kpos = a.kw0 + j;
    if (kpos >= a.sp.pos0) {
      *kind = 0;
      return (const u8*)(KV + (long long)(a.sp.start + kpos - a.sp.pos0) * dim);
    }
    *kind = 1;
    return slot_ptr(win, a.sp.index, kpos % winSize);
  }
  const int c = j - a.nw;
  *kind = 2;
  return slot_ptr(comp, a.sp.index, sel ? sel[(long long)t * selK + c] : c);
}

// ATT_G channels of a key are decoded from one load (8 bytes of FP8, 16
// of BF16, 32 of F32) where the slot layout allows; key_group8 gives the
// same values as key_value channel by channel (the same decoders), so the
// bits do not depend on the path.
#define ATT_G 8
#define ATT_GU 4  // groups a thread has in flight in attn_load_keys

__device__ __forceinline__ bool al8(const void* p) { return (((unsigned long long)p) & 7ull) == 0; }
__device__ __forceinline__ bool al16(const void* p) { return (((unsigned long long)p) & 15ull) == 0; }

// KeyGroup is one group's raw bytes (up to 32) and how to decode them.
struct KeyGroup {
  uint2 r[4];
  int mode;  // 0: fp8 (r[0], times sc), 1: bf16 (r[0..1]), 2: f32 (r[0..3]), 3: channel by channel
  float sc;
};

// key_group_load loads channels [i0, i0 + ATT_G) of key p (kind as
// key_value) into g; i0 is a multiple of ATT_G below dim.
__device__ __forceinline__ void key_group_load(KeyGroup& g, const u8* p, int kind, const Paged& win, const Paged& comp,
                                               int dim, int i0) {
  g.mode = 3;
  if (i0 + ATT_G > dim) return;
  if (kind == 0) {
    const float* f = (const float*)p + i0;
    if (al16(f)) {
      const uint4 a = *(const uint4*)f, b = *(const uint4*)(f + 4);
      g.r[0] = make_uint2(a.x, a.y); g.r[1] = make_uint2(a.z, a.w);
      g.r[2] = make_uint2(b.x, b.y); g.r[3] = make_uint2(b.z, b.w);
      g.mode = 2;
    }
    return;
  }
  const Paged& pg = kind == 1 ? win : comp;
  switch (pg.fmt) {
    case SLOT_F32: {
      const u8* q = p + 4 * i0;
      if (al8(q)) {
        const uint2* u = (const uint2*)q;
        g.r[0] = u[0]; g.r[1] = u[1]; g.r[2] = u[2]; g.r[3] = u[3];
        g.mode = 2;
      }
      return;
    }
    case SLOT_BF16: {
      const u8* q = p + 2 * i0;
      if (al8(q)) {
        const uint2* u = (const uint2*)q;
        g.r[0] = u[0]; g.r[1] = u[1];
        g.mode = 1;
      }
      return;
    }
    case SLOT_FP8KV: {
      const int nope = dim - pg.rope;
      if (i0 + ATT_G <= nope) {
        const u8* q = p + i0;
        if (al8(q)) {
          g.r[0] = *(const uint2*)q;
          g.sc = ue8m0(p[nope + 2 * pg.rope + i0 / KV_BLOCK]);
          g.mode = 0;
        }
      } else if (i0 >= nope) {
        const u8* q = p + nope + 2 * (i0 - nope);
        if (al8(q)) {
          const uint2* u = (const uint2*)q;
          g.r[0] = u[0]; g.r[1] = u[1];
          g.mode = 1;
        }
      }
      return;
    }
    default:
      return;
  }
}

// key_group_generic is key_group_store's mode 3 (channel by channel
// through key_value) out of line, so that a loop over many groups does not
// copy every format's decoder into each.
__device__ __attribute__((noinline)) void key_group_generic(float* v, const u8* p, int kind, const Paged& win,
                                                            const Paged& comp, int dim, int i0) {
  for (int k = 0; k < ATT_G && i0 + k < dim; ++k) v[k] = key_value(p, kind, win, comp, dim, i0 + k);
}

// key_group_store writes the group's ATT_G values to v (channel by channel
// through key_value for mode 3: out of line with OUTLINE).
template <bool OUTLINE = false>
__device__ __forceinline__ void key_group_store(float* v, const KeyGroup& g, const u8* p, int kind, const Paged& win,
                                                const Paged& comp, int dim, int i0) {
  switch (g.mode) {
    case 0: {
      // The hardware's e4m3 to float16 to float32 conversions (exact, NaN
      // codes to NaN: e4m3's values) instead of e4m3's bit placement and
      // its NaN test, then the same multiply: the same bits.
      float e[8];
      e4m3x4_hw(g.r[0].x, e);
      e4m3x4_hw(g.r[0].y, e + 4);
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = __fmul_rn(e[k], g.sc);
      break;
    }
    case 1: {
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        v[4 * k] = bf16_to_f32(g.r[k].x);
        v[4 * k + 1] = bf16_to_f32(g.r[k].x >> 16);
        v[4 * k + 2] = bf16_to_f32(g.r[k].y);
        v[4 * k + 3] = bf16_to_f32(g.r[k].y >> 16);
      }
      break;
    }
    case 2: {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        v[2 * k] = __uint_as_float(g.r[k].x);
        v[2 * k + 1] = __uint_as_float(g.r[k].y);
      }
      break;
    }
    default:
      if (OUTLINE)
        key_group_generic(v, p, kind, win, comp, dim, i0);
      else
        for (int k = 0; k < ATT_G && i0 + k < dim; ++k) v[k] = key_value(p, kind, win, comp, dim, i0 + k);
  }
}

// attn_load_keys decodes channels [c0, c0 + cw) of keys [j0, j0 + kn) of
// token t into ks (kn rows of cw floats); every thread of the block calls
// it. Each thread decodes groups of ATT_G channels, GU groups' loads in
// flight at once (more than ATT_GU: the rare layouts decoded out of line).
// c0 is a multiple of ATT_G, and so is cw unless the slice ends at dim.
template <int GU = ATT_GU>
__device__ __forceinline__ void attn_load_keys(float* ks, const u8** kp, int* kind, const AttnTok& a, int t, int j0,
                                               int kn, const float* KV, int dim, const Paged& win, int winSize,
                                               const Paged& comp, const int* sel, int selK, int vec, int c0, int cw) {
  for (int j = threadIdx.x; j < kn; j += blockDim.x) kp[j] = attn_key_ptr(a, t, j0 + j, KV, dim, win, winSize, comp, sel, selK, &kind[j]);
  __syncthreads();
  if (!vec) {  // run 5's loads, channel by channel (the same values)
    for (int e = threadIdx.x; e < kn * cw; e += blockDim.x) {
      const int j = e / cw, i = e - j * cw;
      ks[e] = key_value(kp[j], kind[j], win, comp, dim, c0 + i);
    }
    __syncthreads();
    return;
  }
  const int G = (cw + ATT_G - 1) / ATT_G, ng = kn * G;
  for (int e0 = 0; e0 < ng; e0 += GU * (int)blockDim.x) {
    KeyGroup g[GU];
#pragma unroll
    for (int u = 0; u < GU; ++u) {
      const int e = e0 + u * (int)blockDim.x + (int)threadIdx.x;
      g[u].mode = 4;
      if (e < ng) {
        const int j = e / G, i0 = c0 + (e - j * G) * ATT_G;
        key_group_load(g[u], kp[j], kind[j], win, comp, dim, i0);
      }
    }
#pragma unroll
    for (int u = 0; u < GU; ++u) {
      const int e = e0 + u * (int)blockDim.x + (int)threadIdx.x;
      if (g[u].mode == 4) continue;
      const int j = e / G, i0 = (e - j * G) * ATT_G;
      key_group_store<(GU > ATT_GU)>(ks + j * cw + i0, g[u], kp[j], kind[j], win, comp, dim, c0 + i0);
    }
  }
  __syncthreads();
}

// attn_chunk_logits writes the logits of kn keys (ks, rows of dim) for hn
// <= HG heads (qs, rows of dim) to dst[h·hstride + j]: each head's dot
// product in its own chain (acc[h]: i = lane, lane + 32, ... in order, then
// the butterfly), all of the block's heads at once for a key, warp w the
// keys w, w + nwarps, ...; times scale.
template <int HG>
__device__ __forceinline__ void attn_chunk_logits(float* dst, long long hstride, const float* ks, const float* qs,
                                                  int kn, int hn, int dim, float scale) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int j = warp; j < kn; j += (int)(blockDim.x >> 5)) {
    const float* k = ks + j * dim;
    float acc[HG];
#pragma unroll
    for (int h = 0; h < HG; ++h) acc[h] = 0.0f;
    for (int i = lane; i < dim; i += 32) {
      const float kv = k[i];
#pragma unroll
      for (int h = 0; h < HG; ++h)
        if (h < hn) acc[h] = __fmaf_rn(qs[h * dim + i], kv, acc[h]);
    }
#pragma unroll
    for (int h = 0; h < HG; ++h) {
      if (h >= hn) break;
      const float a = warp_sum(acc[h]);
      if (lane == 0) dst[h * hstride + j] = __fmul_rn(a, scale);
    }
  }
}

// attn_logits: lg[t - t0][h][j] for the keys j of chunk blockIdx.z (kc
// keys a chunk: a logit does not depend on the chunks, so small launches
// take short ones for more blocks) and heads [blockIdx.y·HG, +HG). Grid
// (tokens, ceil(heads/HG), ceil(maxKeys/kc)); dynamic shared memory: (kc
// + HG)·dim floats + kc·12 bytes.
template <int HG>
__device__ __forceinline__ void attn_logits_body(float* lg, int t0, const float* Q, const float* KV, const int* tab,
                                                 int nspans, const int* pos, Paged win, int winSize, Paged comp,
                                                 int hasComp, int rate, const int* sel, const int* cnt, int selK,
                                                 int heads, int dim, float scale, int maxKeys, int vec, int kc) {
  DYN_SHARED(float, sm);
  float* ks = sm;
  float* qs = ks + kc * dim;
  const u8** kp = (const u8**)(qs + HG * dim);
  int* kind = (int*)(kp + kc);
  const int tl = blockIdx.x, t = t0 + tl, h0 = blockIdx.y * HG, j0 = blockIdx.z * kc;
  const AttnTok a = attn_tok(tab, nspans, pos, t, winSize, hasComp, rate, sel, cnt, maxKeys);
  if (a.bad || j0 >= a.nk) return;
  const int kn = min(kc, a.nk - j0), hn = min(HG, heads - h0);
  for (int i = threadIdx.x; i < hn * dim; i += blockDim.x) qs[i] = Q[((long long)t * heads + h0) * dim + i];
  attn_load_keys(ks, kp, kind, a, t, j0, kn, KV, dim, win, winSize, comp, sel, selK, vec, 0, dim);
  attn_chunk_logits<HG>(lg + ((long long)tl * heads + h0) * maxKeys + j0, maxKeys, ks, qs, kn, hn, dim, scale);
}

// attn_values: see above. Grid (tokens, ceil(heads/HG), split ?
// ceil(maxKeys/ATT_KC) : 1); with split, block y takes the channels
// [c0, c0 + cw) (cw = dim/dsplit, c0 = (y % dsplit)·cw) of the heads of
// group y / dsplit (a channel's sums do not depend on the others': more
// blocks, the same bits); dynamic shared memory: ATT_KC·cw floats +
// ATT_KC·12 bytes. With split it writes po[t-t0][h][s][dim], pl[t-t0][h][s]
// and pm[t-t0][h] (S = gridDim.z chunks a row); without, out.
template <int HG>
__device__ __forceinline__ void attn_values_body(float* out, float* po, float* pl, float* pm, int split,
                                                 const float* lg, int t0, const float* KV, const int* tab, int nspans,
                                                 const int* pos, Paged win, int winSize, Paged comp, int hasComp,
                                                 int rate, const int* sel, const int* cnt, int selK, const float* sink,
                                                 int heads, int dim, int maxKeys, int vec, int dsplit) {
  __shared__ float sM[HG], sE[HG][ATT_KC], sL[HG];
  DYN_SHARED(float, sm);
  if (!split) dsplit = 1;
  const int cw = dim / dsplit, ds = blockIdx.y % dsplit, c0 = ds * cw;
  float* ks = sm;
  const u8** kp = (const u8**)(ks + ATT_KC * cw);
  int* kind = (int*)(kp + ATT_KC);
  const int tl = blockIdx.x, t = t0 + tl, h0 = blockIdx.y / dsplit * HG;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const AttnTok a = attn_tok(tab, nspans, pos, t, winSize, hasComp, rate, sel, cnt, maxKeys);
  const int hn = min(HG, heads - h0);
  if (a.bad) {
    if (!split)
      for (int i = tid; i < hn * dim; i += blockDim.x) out[((long long)t * heads + h0) * dim + i] = __uint_as_float(QNAN_BITS);
    return;
  }
  const int nchunks = (a.nk + ATT_KC - 1) / ATT_KC;
  int s0 = 0, s1 = nchunks;
  if (split) {
    s0 = blockIdx.z;
    s1 = s0 + 1;
    if (s0 >= nchunks) return;
  }
  const float* lrow = lg + (long long)tl * heads * maxKeys;
  for (int hw = warp; hw < hn; hw += MT / 32) {
    const int h = h0 + hw;
    float mx = sink[h];
    // The logits in order, 8 loads in flight at a time.
    for (int j0 = lane; j0 < a.nk; j0 += 8 * 32) {
      float l[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int j = j0 + 32 * u;
        l[u] = j < a.nk ? lrow[(long long)h * maxKeys + j] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (j0 + 32 * u < a.nk) mx = fmaxf(mx, l[u]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
    if (lane == 0) sM[hw] = mx;
  }
  float acc[HG][ATT_MAXV], den[HG];
#pragma unroll
  for (int h = 0; h < HG; ++h) {
    den[h] = 0.0f;
#pragma unroll
    for (int v = 0; v < ATT_MAXV; ++v) acc[h][v] = 0.0f;
  }
  for (int s = s0; s < s1; ++s) {
    const int j0 = s * ATT_KC, kn = min(ATT_KC, a.nk - j0);
    attn_load_keys(ks, kp, kind, a, t, j0, kn, KV, dim, win, winSize, comp, sel, selK, vec, c0, cw);
    for (int hw = warp; hw < hn; hw += MT / 32) {
      const int h = h0 + hw;
      if (lane < kn) sE[hw][lane] = exp_f(__fsub_rn(lrow[(long long)h * maxKeys + j0 + lane], sM[hw]));
      __syncwarp();
      if (lane == 0) {
        float l = 0.0f;
        for (int j = 0; j < kn; ++j) l = __fadd_rn(l, sE[hw][j]);
        sL[hw] = l;
      }
    }
    __syncthreads();
#pragma unroll
    for (int v = 0; v < ATT_MAXV; ++v) {
      const int i = tid + v * MT;  // channel c0 + i
      if (i >= cw) break;
      float o[HG];
#pragma unroll
      for (int h = 0; h < HG; ++h) o[h] = 0.0f;
      for (int j = 0; j < kn; ++j) {
        const float kv = ks[j * cw + i];
#pragma unroll
        for (int h = 0; h < HG; ++h) o[h] = __fmaf_rn(sE[h][j], kv, o[h]);
      }
#pragma unroll
      for (int h = 0; h < HG; ++h) {
        if (h >= hn) break;
        if (split) po[(((long long)tl * heads + h0 + h) * gridDim.z + s) * dim + c0 + i] = o[h];
        else acc[h][v] = __fadd_rn(acc[h][v], o[h]);
      }
    }
#pragma unroll
    for (int h = 0; h < HG; ++h) {
      if (h >= hn) break;
      if (split) {
        if (tid == 0 && ds == 0) pl[((long long)tl * heads + h0 + h) * gridDim.z + s] = sL[h];
      } else {
        den[h] = __fadd_rn(den[h], sL[h]);
      }
    }
    __syncthreads();
  }
  if (split) {
    if (s0 == 0 && ds == 0 && tid < hn) pm[(long long)tl * heads + h0 + tid] = sM[tid];
    return;
  }
#pragma unroll
  for (int h = 0; h < HG; ++h) {
    if (h >= hn) break;
    const float d = __fadd_rn(exp_f(__fsub_rn(sink[h0 + h], sM[h])), den[h]);
#pragma unroll
    for (int v = 0; v < ATT_MAXV; ++v) {
      const int i = tid + v * MT;
      if (i >= dim) break;
      out[((long long)t * heads + h0 + h) * dim + i] = __fdiv_rn(acc[h][v], d);
    }
  }
}


// The entries: HG heads a block (4, or 16 where many tokens give enough
// blocks: each block decodes its chunk's keys once for all of its heads).
// Every logit and every value sum is computed in the same order whatever
// HG, so both give the same bits.
#define ATTN_ENTRIES(SUF, HG)                                                                                       \
  extern "C" __global__ void __launch_bounds__(MT)                                                                 \
      attn_logits##SUF(float* lg, int t0, const float* Q, const float* KV, const int* tab, int nspans,              \
                       const int* pos, Paged win, int winSize, Paged comp, int hasComp, int rate, const int* sel,  \
                       const int* cnt, int selK, int heads, int dim, float scale, int maxKeys, int vec, int kc) {  \
    PDL_WAIT();                                                                                                     \
    attn_logits_body<HG>(lg, t0, Q, KV, tab, nspans, pos, win, winSize, comp, hasComp, rate, sel, cnt, selK, heads, \
                         dim, scale, maxKeys, vec, kc);                                                             \
  }                                                                                                                 \
  extern "C" __global__ void __launch_bounds__(MT)                                                                 \
      attn_values##SUF(float* out, float* po, float* pl, float* pm, int split, const float* lg, int t0,             \
                       const float* KV, const int* tab, int nspans, const int* pos, Paged win, int winSize,         \
                       Paged comp, int hasComp, int rate, const int* sel, const int* cnt, int selK,                 \
                       const float* sink, int heads, int dim, int maxKeys, int vec, int dsplit) {                   \
    PDL_WAIT();                                                                                                     \
    attn_values_body<HG>(out, po, pl, pm, split, lg, t0, KV, tab, nspans, pos, win, winSize, comp, hasComp, rate,   \
                         sel, cnt, selK, sink, heads, dim, maxKeys, vec, dsplit);                                   \
  }
ATTN_ENTRIES(, 4)
ATTN_ENTRIES(_h16, 16)

// AC_CHUNKS, AC_CH: attn_combine loads every partial at once where a row
// has at most AC_CHUNKS chunks (a Flash layer's 640 keys at batch 1 are
// 20) and a thread at most AC_CH channels.
#define AC_CHUNKS 24
#define AC_CH 2

// attn_combine: out of the split attn_values' chunk sums. Grid (tokens,
// heads); S chunks a row of the partials. With nf > 0 (at most MT) the
// last 2·nf channels are then turned back at the token's position by
// invFreq (AttentionArgs.OutRoPE): rope_heads' inverse turn of the same
// values, so the same bits as the two kernels.
extern "C" __global__ void __launch_bounds__(MT)
    attn_combine(float* out, const float* po, const float* pl, const float* pm, int S, int t0, const int* tab,
                 int nspans, const int* pos, int winSize, int hasComp, int rate, const int* sel, const int* cnt,
                 const float* sink, int heads, int dim, int maxKeys, const float* invFreq, int nf, int r21) { PDL_WAIT();
  __shared__ float tail[2 * MT];
  const int tl = blockIdx.x, t = t0 + tl, h = blockIdx.y, tid = threadIdx.x, n0 = dim - 2 * nf;
  const AttnTok a = attn_tok(tab, nspans, pos, t, winSize, hasComp, rate, sel, cnt, maxKeys);
  float* o = out + ((long long)t * heads + h) * dim;
  if (a.bad) {
    for (int i = tid; i < dim; i += blockDim.x) o[i] = __uint_as_float(QNAN_BITS);
    return;
  }
  // Pair tid's turn (rope_heads': one pair a thread), while the sums load.
  float c = 0.0f, sn = 0.0f;
  if (tid < nf) rope_cs(pos[t], invFreq[tid], true, &c, &sn);
  const int nchunks = (a.nk + ATT_KC - 1) / ATT_KC;
  const long long row = (long long)tl * heads + h;
  if (!r21 && nchunks <= AC_CHUNKS && dim <= AC_CH * (int)blockDim.x) {
    // Every load in flight at once (run 21's form, below, waited on L2
    // once for each 8 chunks of the denominator, then of each channel:
    // 9 waits at 20 chunks), then the same sums in chunk order.
    float pd[AC_CHUNKS], pv[AC_CH][AC_CHUNKS];
#pragma unroll
    for (int u = 0; u < AC_CHUNKS; ++u) pd[u] = u < nchunks ? pl[row * S + u] : 0.0f;
#pragma unroll
    for (int m = 0; m < AC_CH; ++m) {
      const int i = tid + m * blockDim.x;
#pragma unroll
      for (int u = 0; u < AC_CHUNKS; ++u) pv[m][u] = u < nchunks && i < dim ? po[(row * S + u) * dim + i] : 0.0f;
    }
    const float mrow = pm[row], sk = sink[h];
    float den = 0.0f;
#pragma unroll
    for (int u = 0; u < AC_CHUNKS; ++u)
      if (u < nchunks) den = __fadd_rn(den, pd[u]);
    const float d = __fadd_rn(exp_f(__fsub_rn(sk, mrow)), den);
#pragma unroll
    for (int m = 0; m < AC_CH; ++m) {
      const int i = tid + m * blockDim.x;
      float acc = 0.0f;
#pragma unroll
      for (int u = 0; u < AC_CHUNKS; ++u)
        if (u < nchunks) acc = __fadd_rn(acc, pv[m][u]);
      const float v = __fdiv_rn(acc, d);
      if (i >= dim) continue;
      if (i >= n0)
        tail[i - n0] = v;
      else
        o[i] = v;
    }
  } else {
    // The chunks in order (hc_seg_sum: 8 loads in flight at a time).
    const float den = hc_seg_sum(pl + row * S, nchunks, 1);
    const float d = __fadd_rn(exp_f(__fsub_rn(sink[h], pm[row])), den);
    for (int i = tid; i < dim; i += blockDim.x) {
      const float v = __fdiv_rn(hc_seg_sum(po + row * S * dim + i, nchunks, dim), d);
      if (i >= n0)
        tail[i - n0] = v;
      else
        o[i] = v;
    }
  }
  if (nf == 0) return;
  __syncthreads();
  if (tid < nf) rope_turn(tail[2 * tid], tail[2 * tid + 1], c, sn, &o[n0 + 2 * tid], &o[n0 + 2 * tid + 1]);
}

// ---- attention tiled over the heads' shared keys (attn_qk, attn_pv) ----
//
// The same logits and value sums as attn_logits and attn_values, bit for
// bit, with a block's work laid out for what a DeepSeek-V4 layer's heads
// share: one key (K = V) serves every head, so a block decodes its keys
// once for 8 or 16 heads and each thread keeps many heads' chains at once.
//   attn_qk: a block takes kb keys (a multiple of 4) and hb heads (8 or
//     16); a warp takes tiles of QK_TK keys × QK_TH heads, lane l keeping
//     the tile's 32 dot-product chains over its channels i = l, l + 32,
//     ... (attn_logits' chains, in the same order): 12 shared loads for 32
//     multiply-adds instead of 5 for 4. The 32 warp sums are one
//     reduce-scatter (qk_scatter32): warp_sum's additions, 31 shuffles
//     instead of 160.
//   attn_pv: a block takes PV_HB heads and one chunk of ATT_KC keys (split)
//     or all of them in order; a thread keeps TH heads × 4 consecutive
//     channels of attn_values' chains over the chunk's keys (a 16-byte
//     load of the key and TH/4 of the weights for 4·TH multiply-adds,
//     against 1 + HG for HG).
// attn_combine adds their chunks as it adds attn_values'.

#define QK_TK 4
#define QK_TH 8
#define PV_HB 16

// qk_scatter32 returns on lane o the warp's sum of v[o] (each lane's 32
// sums), with warp_sum's additions: at distance d = 16, 8, ..., 1 a lane
// keeps the half of its remaining sums whose index has its own bit d and
// adds the partner's, so every partial sum is the one warp_sum forms (a +
// b and b + a are the same float).
__device__ __forceinline__ float qk_scatter32(float (&v)[32]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    const bool up = (lane & d) != 0;
#pragma unroll
    for (int k = 0; k < d; ++k) {
      const float send = up ? v[k] : v[k + d];
      const float keep = up ? v[k + d] : v[k];
      v[k] = __fadd_rn(keep, __shfl_xor_sync(0xFFFFFFFFu, send, d));
    }
  }
  return v[0];
}

// attn_qk: lg[t - t0][h][j] for the keys j of chunk blockIdx.z (kb keys)
// and heads [blockIdx.y·hb, +hb). Grid (tokens, ceil(heads/hb),
// ceil(maxKeys/kb)), whole warps up to MT (a warp a tile at most; the
// host gives MT: the extra warps load queries and keys); dynamic shared
// memory: (kb + hb)·dim floats + kb·12 bytes. attn_qk_body's TK is the
// keys of a warp's tile: QK_TK (attn_qk), or 2·QK_TK (attn_qk8, for kb a
// multiple of 8: 64 chains a lane, 16 shared loads for 64 multiply-adds
// instead of 24 for two tiles of 4 keys; each of its 32-chain halves
// reduced as attn_qk's, so the same bits).
template <int TK>
__device__ __forceinline__ void attn_qk_body(float* lg, int t0, const float* Q, const float* KV, const int* tab,
                                             int nspans, const int* pos, Paged win, int winSize, Paged comp,
                                             int hasComp, int rate, const int* sel, const int* cnt, int selK,
                                             int heads, int dim, float scale, int maxKeys, int vec, int kb, int hb) {
  DYN_SHARED(float, sm);
  float* ks = sm;
  float* qs = ks + kb * dim;
  const u8** kp = (const u8**)(qs + hb * dim);
  int* kind = (int*)(kp + kb);
  const int tl = blockIdx.x, t = t0 + tl, h0 = blockIdx.y * hb, j0 = blockIdx.z * kb;
  const AttnTok a = attn_tok(tab, nspans, pos, t, winSize, hasComp, rate, sel, cnt, maxKeys);
  if (a.bad || j0 >= a.nk) return;
  const int kn = min(kb, a.nk - j0), hn = min(hb, heads - h0);
  // The block's queries, 8 loads of 16 bytes in flight a thread (dim is a
  // multiple of 4); heads past hn read zeros (their sums are not stored).
  {
    const float4* q4 = (const float4*)(Q + ((long long)t * heads + h0) * dim);
    float4* qs4 = (float4*)qs;
    const int n4 = hn * dim / 4, m4 = hb * dim / 4;
    float4 zero;
    zero.x = zero.y = zero.z = zero.w = 0.0f;
    for (int i0 = threadIdx.x; i0 < m4; i0 += 8 * blockDim.x) {
      float4 v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int i = i0 + u * blockDim.x;
        v[u] = i < n4 ? q4[i] : zero;
      }
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (i0 + u * blockDim.x < m4) qs4[i0 + u * blockDim.x] = v[u];
    }
  }
  attn_load_keys(ks, kp, kind, a, t, j0, kn, KV, dim, win, winSize, comp, sel, selK, vec, 0, dim);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const int nkt = (kn + TK - 1) / TK, nht = (hn + QK_TH - 1) / QK_TH;
  for (int tile = warp; tile < nkt * nht; tile += nw) {
    const int kt = tile % nkt, ht = tile / nkt;
    // Rows past kn are in the block's buffer and not stored either.
    const float* kr = ks + kt * TK * dim;
    const float* qr = qs + ht * QK_TH * dim;
    float v[TK * QK_TH];
#pragma unroll
    for (int o = 0; o < TK * QK_TH; ++o) v[o] = 0.0f;
    for (int i = lane; i < dim; i += 32) {
      float k[TK], q[QK_TH];
#pragma unroll
      for (int jj = 0; jj < TK; ++jj) k[jj] = kr[jj * dim + i];
#pragma unroll
      for (int hh = 0; hh < QK_TH; ++hh) q[hh] = qr[hh * dim + i];
#pragma unroll
      for (int jj = 0; jj < TK; ++jj)
#pragma unroll
        for (int hh = 0; hh < QK_TH; ++hh) v[jj * QK_TH + hh] = __fmaf_rn(q[hh], k[jj], v[jj * QK_TH + hh]);
    }
#pragma unroll
    for (int part = 0; part < TK / QK_TK; ++part) {
      // Keys part·QK_TK .. +QK_TK of the tile: their 32 chains.
      float w[QK_TK * QK_TH];
#pragma unroll
      for (int o = 0; o < QK_TK * QK_TH; ++o) w[o] = v[part * QK_TK * QK_TH + o];
      const float s = qk_scatter32(w);
      const int j = kt * TK + part * QK_TK + lane / QK_TH, h = ht * QK_TH + lane % QK_TH;
      if (j < kn && h < hn) lg[((long long)tl * heads + h0 + h) * maxKeys + j0 + j] = __fmul_rn(s, scale);
    }
  }
}

#define ATTN_QK_ENTRY(NAME, TK)                                                                                        \
  extern "C" __global__ void __launch_bounds__(MT)                                                                     \
      NAME(float* lg, int t0, const float* Q, const float* KV, const int* tab, int nspans, const int* pos, Paged win,  \
           int winSize, Paged comp, int hasComp, int rate, const int* sel, const int* cnt, int selK, int heads, int dim, \
           float scale, int maxKeys, int vec, int kb, int hb) {                                                        \
    PDL_WAIT();                                                                                                        \
    attn_qk_body<TK>(lg, t0, Q, KV, tab, nspans, pos, win, winSize, comp, hasComp, rate, sel, cnt, selK, heads, dim,   \
                     scale, maxKeys, vec, kb, hb);                                                                     \
  }
ATTN_QK_ENTRY(attn_qk, QK_TK)
ATTN_QK_ENTRY(attn_qk8, 2 * QK_TK)

// attn_pv: attn_values' outputs (or, with split, its chunk sums) for the
// heads [blockIdx.y / dsplit · PV_HB, +PV_HB), threads (cw/4)·(PV_HB/TH)
// of MT (cw = dim/dsplit, a multiple of 4); grid and dynamic shared memory
// as attn_values'.
template <int TH>
__device__ __forceinline__ void attn_pv_body(float* out, float* po, float* pl, float* pm, int split, const float* lg,
                                             int t0, const float* KV, const int* tab, int nspans, const int* pos,
                                             Paged win, int winSize, Paged comp, int hasComp, int rate, const int* sel,
                                             const int* cnt, int selK, const float* sink, int heads, int dim,
                                             int maxKeys, int vec, int dsplit) {
  __shared__ float sM[PV_HB], sL[PV_HB];
  __shared__ __align__(16) float sE[ATT_KC][PV_HB];
  DYN_SHARED(float, sm);
  if (!split) dsplit = 1;
  const int cw = dim / dsplit, ds = blockIdx.y % dsplit, c0 = ds * cw;
  float* ks = sm;
  const u8** kp = (const u8**)(ks + ATT_KC * cw);
  int* kind = (int*)(kp + ATT_KC);
  const int tl = blockIdx.x, t = t0 + tl, h0 = blockIdx.y / dsplit * PV_HB;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const AttnTok a = attn_tok(tab, nspans, pos, t, winSize, hasComp, rate, sel, cnt, maxKeys);
  const int hn = min(PV_HB, heads - h0);
  if (a.bad) {
    if (!split)
      for (int i = tid; i < hn * dim; i += blockDim.x) out[((long long)t * heads + h0) * dim + i] = __uint_as_float(QNAN_BITS);
    return;
  }
  const int nchunks = (a.nk + ATT_KC - 1) / ATT_KC;
  int s0 = 0, s1 = nchunks;
  if (split) {
    s0 = blockIdx.z;
    s1 = s0 + 1;
    if (s0 >= nchunks) return;
  }
  const float* lrow = lg + (long long)tl * heads * maxKeys;
  // Each head's maximum over all the token's logits and its sink (a
  // maximum: the same whatever the order), a warp's two heads hw and hw +
  // 8 at once (their loads in flight together).
  for (int hw = warp; hw < hn; hw += 2 * (MT / 32)) {
    const int hw2 = hw + MT / 32;
    const bool two = hw2 < hn;
    const float* la = lrow + (long long)(h0 + hw) * maxKeys;
    const float* lb = lrow + (long long)(h0 + (two ? hw2 : hw)) * maxKeys;
    float ma = sink[h0 + hw], mb = sink[h0 + (two ? hw2 : hw)];
    for (int j0 = lane; j0 < a.nk; j0 += 8 * 32) {
      float l[8], m[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int j = j0 + 32 * u;
        l[u] = j < a.nk ? la[j] : 0.0f;
        m[u] = j < a.nk ? lb[j] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (j0 + 32 * u < a.nk) ma = fmaxf(ma, l[u]), mb = fmaxf(mb, m[u]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      ma = fmaxf(ma, __shfl_xor_sync(0xFFFFFFFFu, ma, o));
      mb = fmaxf(mb, __shfl_xor_sync(0xFFFFFFFFu, mb, o));
    }
    if (lane == 0) {
      sM[hw] = ma;
      if (two) sM[hw2] = mb;
    }
  }
  // The thread's item: heads [hg0, hg0 + TH) of the block's, channels
  // c0 + [4·qd, 4·qd + 4).
  const int nq = cw / 4, g = tid / nq, qd = tid - g * nq, hg0 = g * TH;
  const bool act = hg0 < hn;
  float acc[TH][4], den[TH];
#pragma unroll
  for (int h = 0; h < TH; ++h) {
    den[h] = 0.0f;
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[h][c] = 0.0f;
  }
  for (int s = s0; s < s1; ++s) {
    const int j0 = s * ATT_KC, kn = min(ATT_KC, a.nk - j0);
    attn_load_keys(ks, kp, kind, a, t, j0, kn, KV, dim, win, winSize, comp, sel, selK, vec, c0, cw);
    // The chunk's weights and their sum in key order, two heads a warp.
    for (int hw = warp; hw < hn; hw += 2 * (MT / 32)) {
      const int hw2 = hw + MT / 32;
      const bool two = hw2 < hn;
      if (lane < kn) {
        sE[lane][hw] = exp_f(__fsub_rn(lrow[(long long)(h0 + hw) * maxKeys + j0 + lane], sM[hw]));
        if (two) sE[lane][hw2] = exp_f(__fsub_rn(lrow[(long long)(h0 + hw2) * maxKeys + j0 + lane], sM[hw2]));
      }
      __syncwarp();
      if (lane == 0) {
        float l = 0.0f, l2 = 0.0f;
        for (int j = 0; j < kn; ++j) {
          l = __fadd_rn(l, sE[j][hw]);
          if (two) l2 = __fadd_rn(l2, sE[j][hw2]);
        }
        sL[hw] = l;
        if (two) sL[hw2] = l2;
      }
    }
    __syncthreads();
    if (act) {
      float o[TH][4];
#pragma unroll
      for (int h = 0; h < TH; ++h)
#pragma unroll
        for (int c = 0; c < 4; ++c) o[h][c] = 0.0f;
      const float* kq = ks + 4 * qd;
      for (int j = 0; j < kn; ++j) {
        const float4 kv = *(const float4*)(kq + j * cw);
        float e[TH];
#pragma unroll
        for (int h4 = 0; h4 < TH; h4 += 4) {
          const float4 w = *(const float4*)(&sE[j][hg0 + h4]);
          e[h4] = w.x, e[h4 + 1] = w.y, e[h4 + 2] = w.z, e[h4 + 3] = w.w;
        }
#pragma unroll
        for (int h = 0; h < TH; ++h) {
          o[h][0] = __fmaf_rn(e[h], kv.x, o[h][0]);
          o[h][1] = __fmaf_rn(e[h], kv.y, o[h][1]);
          o[h][2] = __fmaf_rn(e[h], kv.z, o[h][2]);
          o[h][3] = __fmaf_rn(e[h], kv.w, o[h][3]);
        }
      }
#pragma unroll
      for (int h = 0; h < TH; ++h) {
        if (hg0 + h >= hn) break;
        if (split) {
          float* p = po + (((long long)tl * heads + h0 + hg0 + h) * gridDim.z + s) * dim + c0 + 4 * qd;
#pragma unroll
          for (int c = 0; c < 4; ++c) p[c] = o[h][c];
        } else {
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[h][c] = __fadd_rn(acc[h][c], o[h][c]);
          den[h] = __fadd_rn(den[h], sL[hg0 + h]);
        }
      }
    }
    if (split && tid == 0 && ds == 0)
      for (int h = 0; h < hn; ++h) pl[((long long)tl * heads + h0 + h) * gridDim.z + s] = sL[h];
    __syncthreads();
  }
  if (split) {
    if (s0 == 0 && ds == 0 && tid < hn) pm[(long long)tl * heads + h0 + tid] = sM[tid];
    return;
  }
  if (!act) return;
#pragma unroll
  for (int h = 0; h < TH; ++h) {
    if (hg0 + h >= hn) break;
    const float d = __fadd_rn(exp_f(__fsub_rn(sink[h0 + hg0 + h], sM[hg0 + h])), den[h]);
    float* p = out + ((long long)t * heads + h0 + hg0 + h) * dim + 4 * qd;
#pragma unroll
    for (int c = 0; c < 4; ++c) p[c] = __fdiv_rn(acc[h][c], d);
  }
}

#define ATTN_PV_ENTRY(TH)                                                                                           \
  extern "C" __global__ void __launch_bounds__(MT, 2)                                                              \
      attn_pv##TH(float* out, float* po, float* pl, float* pm, int split, const float* lg, int t0, const float* KV, \
                  const int* tab, int nspans, const int* pos, Paged win, int winSize, Paged comp, int hasComp,     \
                  int rate, const int* sel, const int* cnt, int selK, const float* sink, int heads, int dim,       \
                  int maxKeys, int vec, int dsplit) {                                                              \
    PDL_WAIT();                                                                                                     \
    attn_pv_body<TH>(out, po, pl, pm, split, lg, t0, KV, tab, nspans, pos, win, winSize, comp, hasComp, rate, sel, \
                     cnt, selK, sink, heads, dim, maxKeys, vec, dsplit);                                            \
  }
ATTN_PV_ENTRY(4)
ATTN_PV_ENTRY(8)

// ---- attention on the tensor cores (attn_tc: Fast mode, a few tokens) ----
//
// attn_tc is SparseAttention in one launch for Fast mode at small batches,
// where the split kernels' three launches (attn_qk, attn_pv, attn_combine)
// are a chain of short, latency-bound steps on the layer's critical path.
// Block (t, y, c) takes token t's keys [c·ATC_KC, (c+1)·ATC_KC) for the 16
// heads [16y, 16y + 16) (the mma's rows):
//   - the queries and the chunk's keys are decoded (attc_load and
//     attc_decode: key_group_store's values, every format and kind) and
//     split into bfloat16 pairs v =
//     hi + lo (hi = bf16(v), lo = bf16(v - hi): v to ~2^-17) in shared
//     memory;
//   - logits = scale·(Qhi·Khi + Qhi·Klo + Qlo·Khi) on mma.sync m16n8k16
//     (float32 sums), a warp 8 keys;
//   - the chunk's softmax against its own maximum m_c: p = exp(l - m_c),
//     l_c = Σ p (float32, exp in float64 as the CPU's), p split as hi + lo;
//   - o_c = Phi·Vhi + Phi·Vlo + Plo·Vhi (V = K), a warp the 16-channel
//     pairs of tiles w, w + 8, ... (attc_ch);
//   - a token of one chunk writes o_c / (exp(sink - m_c) + l_c); else every
//     chunk writes (o_c, m_c, l_c) and the token's last block to finish
//     (counter ctr[t][y], reset by it) adds them: M = max m_c, out =
//     Σ e^(m_c - M)·o_c / (e^(sink - M) + Σ e^(m_c - M)·l_c), the chunks in
//     order.
// The output's last 2·nf channels are turned back at the token's position
// (OutRoPE) as attn_combine turns them.
//
// Numerics: every operand to ~2^-17 of its value, the products' sums in
// the tensor cores' float32; the chunks' maxima instead of the token's
// (the same function, other rounding). Not the CPU's bits: Fast mode only,
// measured against the float64 definition (TestBackendAttentionTC).
// Batch-invariant: a token's blocks read only its own keys and queries,
// its chunks fixed by its key count, so its output does not depend on the
// batch (among the batches that take this kernel).
//
// Grid (tokens, ceil(heads/16), S = ceil(maxKeys/ATC_KC)), ATC_NT threads
// (a block's heads past the last: zero queries, no output); dim a
// multiple of 32 up to 512 (each warp at most 4 pairs of 8-channel
// tiles); dynamic shared memory attcShared (attnops.go).
#define ATC_KC 64
#define ATC_NT 256
#define ATC_QU 4  // query groups a thread: 16 heads of up to 512 channels
#define ATC_KU 8  // key groups a thread has in flight

// AttcRaw is one group of 8 channels of a key as loaded (attc_load):
// mode 0 FP8KV e4m3 bytes (a.x, a.y) and their scale byte sb, 1 bfloat16
// (a), 2 float32 (a, b), 3 another layout (attc_generic decodes it), 5 a
// row past the chunk's keys (zeros).
struct AttcRaw {
  uint4 a, b;
  u32 sb;
  int mode;
};

// attc_load loads channels [i0, i0 + 8) of key p (kind as key_value) into
// g, decoding nothing: a thread's groups are all in flight before the
// first is decoded.
__device__ __forceinline__ void attc_load(AttcRaw& g, const u8* p, int kind, const Paged& win, const Paged& comp,
                                          int dim, int i0) {
  g.mode = 3;
  if (kind == 0) {
    const float* f = (const float*)p + i0;
    if (al16(f)) g.a = *(const uint4*)f, g.b = *(const uint4*)(f + 4), g.mode = 2;
    return;
  }
  const Paged& pg = kind == 1 ? win : comp;
  if (pg.fmt == SLOT_FP8KV) {
    const int nope = dim - pg.rope;
    if (i0 + ATT_G <= nope) {
      const u8* q = p + i0;
      if (al8(q)) {
        const uint2 u = *(const uint2*)q;
        g.a.x = u.x, g.a.y = u.y, g.sb = p[nope + 2 * pg.rope + i0 / KV_BLOCK], g.mode = 0;
      }
    } else if (i0 >= nope) {
      const u8* q = p + nope + 2 * (i0 - nope);
      if (al8(q)) {
        const uint2 u = *(const uint2*)q, w = *(const uint2*)(q + 8);
        g.a.x = u.x, g.a.y = u.y, g.a.z = w.x, g.a.w = w.y, g.mode = 1;
      }
    }
  } else if (pg.fmt == SLOT_BF16) {
    const u8* q = p + 2 * i0;
    if (al8(q)) {
      const uint2 u = *(const uint2*)q, w = *(const uint2*)(q + 8);
      g.a.x = u.x, g.a.y = u.y, g.a.z = w.x, g.a.w = w.y, g.mode = 1;
    }
  } else if (pg.fmt == SLOT_F32) {
    const u8* q = p + 4 * i0;
    if (al8(q)) {
      const uint2 u0 = *(const uint2*)q, u1 = *(const uint2*)(q + 8), u2 = *(const uint2*)(q + 16),
                  u3 = *(const uint2*)(q + 24);
      g.a = make_uint4(u0.x, u0.y, u1.x, u1.y), g.b = make_uint4(u2.x, u2.y, u3.x, u3.y), g.mode = 2;
    }
  }
}

// attc_generic decodes channels [i0, i0 + 8) of key p one at a time
// (key_value): the layouts attc_load does not take, out of line so that
// its every format's decoder is not copied into each of the load loop's
// groups (run 27: attn_tc's 320 KB of code waited on the instruction
// cache a third of its cycles).
__device__ __attribute__((noinline)) void attc_generic(float* v, const u8* p, int kind, const Paged& win,
                                                       const Paged& comp, int dim, int i0) {
  for (int k = 0; k < ATT_G; ++k) v[k] = key_value(p, kind, win, comp, dim, i0 + k);
}

// attc_decode writes g's 8 values (key_group_store's decoders: the same
// values) to v.
__device__ __forceinline__ void attc_decode(float* v, const AttcRaw& g, const u8* p, int kind, const Paged& win,
                                            const Paged& comp, int dim, int i0) {
  if (g.mode == 0) {
    e4m3x4_hw(g.a.x, v);
    e4m3x4_hw(g.a.y, v + 4);
    const float sc = ue8m0(g.sb);
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = __fmul_rn(v[k], sc);
  } else if (g.mode == 1) {
    const u32 w[4] = {g.a.x, g.a.y, g.a.z, g.a.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) v[2 * k] = bf16_to_f32(w[k]), v[2 * k + 1] = bf16_to_f32(w[k] >> 16);
  } else if (g.mode == 2) {
    v[0] = __uint_as_float(g.a.x), v[1] = __uint_as_float(g.a.y), v[2] = __uint_as_float(g.a.z), v[3] = __uint_as_float(g.a.w);
    v[4] = __uint_as_float(g.b.x), v[5] = __uint_as_float(g.b.y), v[6] = __uint_as_float(g.b.z), v[7] = __uint_as_float(g.b.w);
  } else if (g.mode == 5) {
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = 0.0f;
  } else {
    attc_generic(v, p, kind, win, comp, dim, i0);
  }
}

// attc_turn turns the pair (*a, *b) back at position p by invFreq (rope_cs
// and rope_turn, as attn_combine), out of line: float64 sincos is long,
// and the output loops would copy it into every channel tile.
__device__ __attribute__((noinline)) void attc_turn(float* a, float* b, int p, float invFreq) {
  float cs, sn, x0, x1;
  rope_cs(p, invFreq, true, &cs, &sn);
  rope_turn(*a, *b, cs, sn, &x0, &x1);
  *a = x0, *b = x1;
}

// attc_split stores the bfloat16 pair of each of v's 8 values: hi at hi,
// lo at lo (16 bytes each).
__device__ __forceinline__ void attc_split(u16* hi, u16* lo, const float* v) {
  u32 h[4], l[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const u32 a = bf16_rn(v[2 * k]), b = bf16_rn(v[2 * k + 1]);
    h[k] = pack2(a, b);
    l[k] = pack2(bf16_rn(__fsub_rn(v[2 * k], bf16_to_f32(a))), bf16_rn(__fsub_rn(v[2 * k + 1], bf16_to_f32(b))));
  }
  *(uint4*)hi = make_uint4(h[0], h[1], h[2], h[3]);
  *(uint4*)lo = make_uint4(l[0], l[1], l[2], l[3]);
}

// attc_ch is the first channel of lane (·, q4)'s outputs of warp w's n-th
// tile: channel pair P = w + 8·(n/2), tile 2P + n%2.
__device__ __forceinline__ int attc_ch(int w, int n, int q4) { return 16 * (w + 8 * (n >> 1)) + 8 * (n & 1) + 2 * q4; }

extern "C" __global__ void __launch_bounds__(ATC_NT)
    attn_tc(float* out, const float* Q, const float* KV, const int* tab, int nspans, const int* pos, Paged win,
            int winSize, Paged comp, int hasComp, int rate, const int* sel, const int* cnt, int selK,
            const float* sink, int heads, int dim, float scale, int maxKeys, float* po, float* pml, unsigned* ctr,
            const float* invFreq, int nf) { PDL_WAIT();
  DYN_SHARED(u8, sm);
  const int ld = dim + 8;  // a row's halves: 16 bytes of padding (ldmatrix's rows in other banks)
  u16* qh = (u16*)sm;
  u16* ql = qh + 16 * ld;
  u16* kh = ql + 16 * ld;
  u16* kl = kh + ATC_KC * ld;
  const int lp = ATC_KC + 8;
  u16* ph = kl + ATC_KC * ld;
  u16* pl = ph + 16 * lp;
  float* sl = (float*)(pl + 16 * lp);    // [16][ATC_KC] logits
  float* ml = sl + 16 * ATC_KC;          // [16] m_c, [16] l_c
  const u8** kp = (const u8**)(ml + 32); // [ATC_KC]
  int* kind = (int*)(kp + ATC_KC);       // [ATC_KC]
  __shared__ unsigned arrived;

  const int t = blockIdx.x, y = blockIdx.y, c = blockIdx.z, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, q4 = lane & 3, S = gridDim.z, HG = gridDim.y;
  const int h0 = 16 * y, nh = min(16, heads - h0);
  // The queries: a thread's (up to ATC_QU) groups of 8 loaded at once,
  // in flight while the token's keys are found; split below.
  const int G = dim / ATT_G;
  float4 qv[ATC_QU][2];
#pragma unroll
  for (int u = 0; u < ATC_QU; ++u) {
    const int e = tid + u * ATC_NT, h = e / G, i0 = (e - h * G) * ATT_G;
    qv[u][0].x = qv[u][0].y = qv[u][0].z = qv[u][0].w = 0.0f;
    qv[u][1] = qv[u][0];
    if (e < 16 * G && h < nh) {
      const float4* src = (const float4*)(Q + ((long long)t * heads + h0 + h) * dim + i0);
      qv[u][0] = __ldg(src), qv[u][1] = __ldg(src + 1);
    }
  }
  const AttnTok a = attn_tok(tab, nspans, pos, t, winSize, hasComp, rate, sel, cnt, maxKeys);
  if (a.bad) {
    if (c == 0)
      for (int i = tid; i < nh * dim; i += ATC_NT) out[((long long)t * heads + h0) * dim + i] = __uint_as_float(QNAN_BITS);
    return;
  }
  const int nch = (a.nk + ATC_KC - 1) / ATC_KC;
  if (c >= nch) return;
  const int j0 = c * ATC_KC, kn = min(ATC_KC, a.nk - j0);

  for (int j = tid; j < kn; j += ATC_NT) kp[j] = attn_key_ptr(a, t, j0 + j, KV, dim, win, winSize, comp, sel, selK, &kind[j]);
#pragma unroll
  for (int u = 0; u < ATC_QU; ++u) {
    const int e = tid + u * ATC_NT, h = e / G, i0 = (e - h * G) * ATT_G;
    if (e >= 16 * G) break;
    const float v[8] = {qv[u][0].x, qv[u][0].y, qv[u][0].z, qv[u][0].w, qv[u][1].x, qv[u][1].y, qv[u][1].z, qv[u][1].w};
    attc_split(qh + h * ld + i0, ql + h * ld + i0, v);
  }
  __syncthreads();
  // The keys, split (rows past kn zero): ATC_KU groups a thread loaded,
  // then decoded.
  const int ng = ATC_KC * G;
  for (int e0 = 0; e0 < ng; e0 += ATC_KU * ATC_NT) {
    AttcRaw kg[ATC_KU];
#pragma unroll
    for (int u = 0; u < ATC_KU; ++u) {
      const int e = e0 + u * ATC_NT + tid;
      kg[u].mode = 4;
      if (e < ng) {
        const int j = e / G, i0 = (e - j * G) * ATT_G;
        if (j < kn)
          attc_load(kg[u], kp[j], kind[j], win, comp, dim, i0);
        else
          kg[u].mode = 5;
      }
    }
#pragma unroll
    for (int u = 0; u < ATC_KU; ++u) {
      const int e = e0 + u * ATC_NT + tid;
      if (kg[u].mode == 4) continue;
      const int j = e / G, i0 = (e - j * G) * ATT_G;
      float v[ATT_G];
      attc_decode(v, kg[u], kg[u].mode == 5 ? nullptr : kp[j], kg[u].mode == 5 ? 0 : kind[j], win, comp, dim, i0);
      attc_split(kh + j * ld + i0, kl + j * ld + i0, v);
    }
  }
  __syncthreads();

  // Logits: warp w the keys [8w, 8w + 8) of all 16 heads, in six
  // independent chains (hi·hi, hi·lo, lo·hi of even and odd k-steps: one
  // chain would wait on each mma before the next).
  {
    float acc[6][4];
#pragma unroll
    for (int u = 0; u < 6; ++u) acc[u][0] = acc[u][1] = acc[u][2] = acc[u][3] = 0.0f;
    const int m = lane >> 3, r = lane & 7;
    const u16* qa = qh + ((m & 1) * 8 + r) * ld + (m >> 1) * 8;
    const u16* qb = ql + ((m & 1) * 8 + r) * ld + (m >> 1) * 8;
    const u16* ka = kh + (8 * warp + r) * ld + m * 8;
    const u16* kb = kl + (8 * warp + r) * ld + m * 8;
    for (int k0 = 0; k0 < dim; k0 += 32) {
      u32 bh[4], bl[4];
      ldmatrix_x4(bh, ka + k0);
      ldmatrix_x4(bl, kb + k0);
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        u32 ah[4], al[4];
        ldmatrix_x4(ah, qa + k0 + 16 * s);
        ldmatrix_x4(al, qb + k0 + 16 * s);
        mma_bf16(acc[3 * s], ah, bh + 2 * s);
        mma_bf16(acc[3 * s + 1], ah, bl + 2 * s);
        mma_bf16(acc[3 * s + 2], al, bh + 2 * s);
      }
    }
#pragma unroll
    for (int u = 1; u < 6; ++u)
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[0][k] = __fadd_rn(acc[0][k], acc[u][k]);
    const int key = 8 * warp + 2 * q4;
    sl[g * ATC_KC + key] = __fmul_rn(acc[0][0], scale);
    sl[g * ATC_KC + key + 1] = __fmul_rn(acc[0][1], scale);
    sl[(g + 8) * ATC_KC + key] = __fmul_rn(acc[0][2], scale);
    sl[(g + 8) * ATC_KC + key + 1] = __fmul_rn(acc[0][3], scale);
  }
  __syncthreads();

  // The chunk's softmax: 16 threads a head, 4 keys each.
  {
    const int h = tid >> 4, k0 = (tid & 15) * 4;
    float v[4], mx = __int_as_float(0xFF800000);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[k] = sl[h * ATC_KC + k0 + k];
      if (k0 + k < kn) mx = fmaxf(mx, v[k]);
    }
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
    float sum = 0.0f, p[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      p[k] = k0 + k < kn ? exp_f(__fsub_rn(v[k], mx)) : 0.0f;
      sum = __fadd_rn(sum, p[k]);
    }
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) sum = __fadd_rn(sum, __shfl_xor_sync(0xFFFFFFFFu, sum, o));
    u32 hi[4], lo[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      hi[k] = bf16_rn(p[k]);
      lo[k] = bf16_rn(__fsub_rn(p[k], bf16_to_f32(hi[k])));
    }
    *(uint2*)(ph + h * lp + k0) = make_uint2(pack2(hi[0], hi[1]), pack2(hi[2], hi[3]));
    *(uint2*)(pl + h * lp + k0) = make_uint2(pack2(lo[0], lo[1]), pack2(lo[2], lo[3]));
    if ((tid & 15) == 0) ml[h] = mx, ml[16 + h] = sum;
  }
  __syncthreads();

  // Values: warp w the channel pairs of tiles P = w, w + 8, ... (channels
  // [16P, 16P + 16), tiles 2P and 2P + 1 as o[2n2], o[2n2 + 1]).
  const int NTL = 8;  // dim = 512: 4 pairs a warp
  float o[NTL][4];
#pragma unroll
  for (int n = 0; n < NTL; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  {
    const int m = lane >> 3, r = lane & 7;
    for (int ks = 0; ks < ATC_KC / 16; ++ks) {
      u32 ah[4], al[4];
      ldmatrix_x4(ah, ph + ((m & 1) * 8 + r) * lp + 16 * ks + (m >> 1) * 8);
      ldmatrix_x4(al, pl + ((m & 1) * 8 + r) * lp + 16 * ks + (m >> 1) * 8);
#pragma unroll
      for (int n2 = 0; n2 < NTL / 2; ++n2) {
        if (16 * (warp + 8 * n2) >= dim) break;
        const int col = 16 * (warp + 8 * n2) + (m >> 1) * 8, row = 16 * ks + (m & 1) * 8 + r;
        u32 bh[4], bl[4];
        ldmatrix_x4_trans(bh, kh + row * ld + col);
        ldmatrix_x4_trans(bl, kl + row * ld + col);
        mma_bf16(o[2 * n2], ah, bh);
        mma_bf16(o[2 * n2], ah, bl);
        mma_bf16(o[2 * n2], al, bh);
        mma_bf16(o[2 * n2 + 1], ah, bh + 2);
        mma_bf16(o[2 * n2 + 1], ah, bl + 2);
        mma_bf16(o[2 * n2 + 1], al, bh + 2);
      }
    }
  }
  // This thread's outputs: heads g, g + 8; channels attc_ch(n) and +1
  // (the n-th tile's).
  const int ha = g, hb = g + 8;
  const float mA = ml[ha], mB = ml[hb], lA = ml[16 + ha], lB = ml[16 + hb];
  const bool okA = ha < nh, okB = hb < nh;  // heads past the last: none
  const long long rowA = (long long)t * heads + h0 + (okA ? ha : 0), rowB = (long long)t * heads + h0 + (okB ? hb : 0);
  if (nch > 1) {
    // Write this chunk's sums; the token's last block adds them all.
#pragma unroll
    for (int n = 0; n < NTL; ++n) {
      const int ch = attc_ch(warp, n, q4);
      if (ch >= dim) break;
      if (okA) *(uint2*)(po + (rowA * S + c) * dim + ch) = make_uint2(__float_as_uint(o[n][0]), __float_as_uint(o[n][1]));
      if (okB) *(uint2*)(po + (rowB * S + c) * dim + ch) = make_uint2(__float_as_uint(o[n][2]), __float_as_uint(o[n][3]));
    }
    if (tid < nh) {
      const long long row = (long long)t * heads + h0 + tid;
      pml[(row * S + c) * 2] = ml[tid];
      pml[(row * S + c) * 2 + 1] = ml[16 + tid];
    }
    __threadfence();
    __syncthreads();
    if (tid == 0) arrived = atomicAdd(ctr + t * HG + y, 1u);
    __syncthreads();
    if (arrived != (unsigned)(nch - 1)) return;
    if (tid == 0) ctr[t * HG + y] = 0;
    __threadfence();
    // Each head's chunk weights e^(m_c - M) (wts: the logits' room, S <=
    // ATC_KC) and 1 / (e^(sink - M) + Σ e^(m_c - M)·l_c) (ml): every
    // chunk's m_c and l_c loaded at once (lsum: the probabilities' room),
    // then a thread a head.
    float* wts = sl;
    float* lsum = (float*)ph;
    for (int e = tid; e < nh * nch; e += ATC_NT) {
      const int h = e / nch, u = e - h * nch;
      const long long row = (long long)t * heads + h0 + h;
      wts[h * ATC_KC + u] = __ldcg(pml + (row * S + u) * 2);
      lsum[h * ATC_KC + u] = __ldcg(pml + (row * S + u) * 2 + 1);
    }
    __syncthreads();
    if (tid < nh) {
      float M = __int_as_float(0xFF800000);
      for (int u = 0; u < nch; ++u) M = fmaxf(M, wts[tid * ATC_KC + u]);
      float d = exp_f(__fsub_rn(sink[h0 + tid], M));
      for (int u = 0; u < nch; ++u) {
        const float w = exp_f(__fsub_rn(wts[tid * ATC_KC + u], M));
        wts[tid * ATC_KC + u] = w;
        d = __fmaf_rn(w, lsum[tid * ATC_KC + u], d);
      }
      ml[tid] = __fdiv_rn(1.0f, d);
    }
    __syncthreads();
    // out = Σ_c w_c·o_c / d, four channels a thread (the chunks' loads
    // eight at a time in flight), the tail turned back.
    const int d4 = dim / 4, n0 = dim - 2 * nf, p = pos[t];
    for (int e = tid; e < nh * d4; e += ATC_NT) {
      const int h = e / d4, c4 = e - h * d4;
      const long long row = (long long)t * heads + h0 + h;
      const uint4* src = (const uint4*)(po + row * S * dim) + c4;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int u0 = 0; u0 < nch; u0 += 8) {
        uint4 v[8];
#pragma unroll
        for (int k = 0; k < 8; ++k)
          if (u0 + k < nch) v[k] = __ldcg(src + (long long)(u0 + k) * d4);
#pragma unroll
        for (int k = 0; k < 8; ++k)
          if (u0 + k < nch) {
            const float w = wts[h * ATC_KC + u0 + k];
            acc[0] = __fmaf_rn(w, __uint_as_float(v[k].x), acc[0]), acc[1] = __fmaf_rn(w, __uint_as_float(v[k].y), acc[1]);
            acc[2] = __fmaf_rn(w, __uint_as_float(v[k].z), acc[2]), acc[3] = __fmaf_rn(w, __uint_as_float(v[k].w), acc[3]);
          }
      }
      const float in = ml[h];
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[k] = __fmul_rn(acc[k], in);
#pragma unroll
      for (int k = 0; k < 4; k += 2) {
        const int ch = 4 * c4 + k;
        if (ch >= n0) attc_turn(&acc[k], &acc[k + 1], p, invFreq[(ch - n0) / 2]);
      }
      *(uint4*)(out + row * dim + 4 * c4) =
          make_uint4(__float_as_uint(acc[0]), __float_as_uint(acc[1]), __float_as_uint(acc[2]), __float_as_uint(acc[3]));
    }
    return;
  }
  // out = o / (e^(sink - m) + l), the tail turned back.
  const float inA = __fdiv_rn(1.0f, __fadd_rn(exp_f(__fsub_rn(sink[h0 + (okA ? ha : 0)], mA)), lA));
  const float inB = __fdiv_rn(1.0f, __fadd_rn(exp_f(__fsub_rn(sink[h0 + (okB ? hb : 0)], mB)), lB));
  const int n0 = dim - 2 * nf, p = pos[t];
#pragma unroll
  for (int n = 0; n < NTL; ++n) {
    const int ch = attc_ch(warp, n, q4);
    if (ch >= dim) break;
    float a0 = __fmul_rn(o[n][0], inA), a1 = __fmul_rn(o[n][1], inA);
    float b0 = __fmul_rn(o[n][2], inB), b1 = __fmul_rn(o[n][3], inB);
    if (ch >= n0) {
      const float f = invFreq[(ch - n0) / 2];
      attc_turn(&a0, &a1, p, f);
      attc_turn(&b0, &b1, p, f);
    }
    if (okA) *(uint2*)(out + rowA * dim + ch) = make_uint2(__float_as_uint(a0), __float_as_uint(a1));
    if (okB) *(uint2*)(out + rowB * dim + ch) = make_uint2(__float_as_uint(b0), __float_as_uint(b1));
  }
}

// ---- attention in one launch on the CUDA cores (attn_fd: Fast mode, few tokens) ----
//
// attn_fd is SparseAttention in one launch for Fast mode at one token
// (flash-decoding in float32), for where attn_tc's blocks are too few and
// too long (run 27: 8-40 blocks of 16 heads × 64 keys, ~50 us a launch
// against ~24 us for attn_qk, attn_pv and attn_combine). Block (t, y, c)
// takes token t's keys [c·AFD_KC, (c+1)·AFD_KC) for the HG heads
// [HG·y, +HG) (4, 2 or 8): a short chain, and many blocks (at 4 heads, a
// Flash window layer's 128 keys are 4 chunks × 16 head groups, a CSA
// layer's at 4K context 20 × 16). The host takes it for up to
// Backend.attnFDMaxT tokens (0 by default: run 31 measured a batch-1 step
// 4.7-5.6% slower with it, H100).
//   - the chunk's keys are decoded into shared memory (attn_load_keys:
//     every format and kind), the heads' queries staged beside them;
//   - the logits are attn_logits' (each head's chain over channels lane,
//     lane + 32, ..., then warp_sum, times scale): the float32 kernels'
//     bits;
//   - the chunk's softmax against its own maximum m_c: p = exp(l - m_c)
//     (float64, as the CPU's), l_c = Σ p (warp_sum's order);
//   - o_c = Σ_j p_j·v_j over the chunk's keys in order (V = K), a thread
//     channels tid and tid + MT of every head;
//   - a token of one chunk writes o_c / (exp(sink - m_c) + l_c); else every
//     chunk writes (o_c, m_c, l_c) and the token's last block to finish
//     (counter ctr[t][y], reset by it) adds them: M = max m_c, w_c =
//     exp(m_c - M), out = Σ w_c·o_c / (exp(sink - M) + Σ w_c·l_c), the
//     numerators' chunks in order, the denominator's a warp a head.
// The output's last 2·nf channels are turned back at the token's position
// (OutRoPE), as attn_combine turns them.
//
// Numerics: float32 throughout, the logits the CPU's; the chunks' maxima
// instead of the token's (the same function, other rounding of the
// exponentials and sums). Fast mode only, measured against the float64
// definition (TestBackendAttentionFD). Batch-invariant among the batches
// that take it: a token's blocks read only its own queries and keys, its
// chunks fixed by its key count.
//
// Grid (tokens, ceil(heads/HG), S = ceil(maxKeys/AFD_KC)), MT threads;
// dim a multiple of 8 up to AFD_CH·MT; S <= AFD_SMAX; dynamic shared
// memory afdShared (attnops.go): the keys (AFD_KC·dim floats), the
// queries (HG·dim), the keys' pointers and kinds.
#define AFD_KC 32
#define AFD_CH 2
#define AFD_SMAX 64

template <int HG>
__device__ __forceinline__ void attn_fd_body(float* out, const float* Q, const float* KV, const int* tab, int nspans,
                                             const int* pos, Paged win, int winSize, Paged comp, int hasComp, int rate,
                                             const int* sel, const int* cnt, int selK, const float* sink, int heads,
                                             int dim, float scale, int maxKeys, float* po, float* pml, unsigned* ctr,
                                             const float* invFreq, int nf) {
  DYN_SHARED(float, sm);
  float* ks = sm;                               // [AFD_KC][dim] keys
  float* qs = ks + AFD_KC * dim;                // [HG][dim] queries
  const u8** kp = (const u8**)(qs + HG * dim);  // [AFD_KC]
  int* kind = (int*)(kp + AFD_KC);              // [AFD_KC]
  __shared__ float pr[HG][AFD_KC];              // logits, then probabilities
  __shared__ float ml[2 * HG];                  // m_c, l_c a head
  __shared__ float wts[HG][AFD_SMAX];           // the last block's chunk weights
  __shared__ float lsum[HG][AFD_SMAX];
  __shared__ float den[HG];
  __shared__ float rcs[2][AFD_CH * MT / 2];     // the tail's turns: cos, sin a pair
  __shared__ unsigned arrived;

  const int t = blockIdx.x, y = blockIdx.y, c = blockIdx.z, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int S = gridDim.z, HGn = gridDim.y;
  const int h0 = HG * y, hn = min(HG, heads - h0);
  // The queries: a thread's groups of 8 channels loaded now, in flight
  // while the keys are found, stored after.
  const int G = dim / ATT_G;
  float4 qv[AFD_CH][2];
#pragma unroll
  for (int u = 0; u < AFD_CH; ++u) {
    const int e = tid + u * MT, h = e / G, i0 = (e - h * G) * ATT_G;
    qv[u][0].x = qv[u][0].y = qv[u][0].z = qv[u][0].w = 0.0f;
    qv[u][1] = qv[u][0];
    if (h < hn) {
      const float4* src = (const float4*)(Q + ((long long)t * heads + h0 + h) * dim + i0);
      qv[u][0] = __ldg(src), qv[u][1] = __ldg(src + 1);
    }
  }
  const AttnTok a = attn_tok(tab, nspans, pos, t, winSize, hasComp, rate, sel, cnt, maxKeys);
  if (a.bad) {
    if (c == 0)
      for (int i = tid; i < hn * dim; i += MT) out[((long long)t * heads + h0) * dim + i] = __uint_as_float(QNAN_BITS);
    return;
  }
  const int nch = (a.nk + AFD_KC - 1) / AFD_KC;
  if (c >= nch) return;
  const int j0 = c * AFD_KC, kn = min(AFD_KC, a.nk - j0);
  // A thread's 8 groups of the chunk's keys (32 keys of 512) in flight at
  // once: one wait on L2 for them.
  attn_load_keys<8>(ks, kp, kind, a, t, j0, kn, KV, dim, win, winSize, comp, sel, selK, 1, 0, dim);
#pragma unroll
  for (int u = 0; u < AFD_CH; ++u) {
    const int e = tid + u * MT, h = e / G, i0 = (e - h * G) * ATT_G;
    if (h < hn) {
      *(float4*)(qs + h * dim + i0) = qv[u][0];
      *(float4*)(qs + h * dim + i0 + 4) = qv[u][1];
    }
  }
  __syncthreads();

  // Logits: attn_logits_body's chains.
  attn_chunk_logits<HG>(&pr[0][0], AFD_KC, ks, qs, kn, hn, dim, scale);
  __syncthreads();

  // The chunk's softmax: warp h head h, lane j key j (a block's heads past
  // the last: zero probabilities, their sums never written).
  if (warp >= hn && warp < HG) pr[warp][lane] = 0.0f;
  if (warp < hn) {
    const int h = warp;
    const float v = lane < kn ? pr[h][lane] : __int_as_float(0xFF800000);
    float mx = v;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
    const float p = lane < kn ? exp_f(__fsub_rn(v, mx)) : 0.0f;
    const float l = warp_sum(p);
    pr[h][lane] = p;
    if (lane == 0) ml[h] = mx, ml[HG + h] = l;
  }
  __syncthreads();

  // Values: channels tid + m·MT of every head, the chunk's keys in order.
  float o[AFD_CH][HG];
#pragma unroll
  for (int m = 0; m < AFD_CH; ++m)
#pragma unroll
    for (int h = 0; h < HG; ++h) o[m][h] = 0.0f;
  for (int j = 0; j < kn; ++j) {
#pragma unroll
    for (int m = 0; m < AFD_CH; ++m) {
      const int i = tid + m * MT;
      const float kv = i < dim ? ks[j * dim + i] : 0.0f;
#pragma unroll
      for (int h = 0; h < HG; ++h) o[m][h] = __fmaf_rn(pr[h][j], kv, o[m][h]);
    }
  }

  const int n0 = dim - 2 * nf, p = pos[t];
  // The tail's turns (rope_cs, float64: long), pair k by thread MT-1-k,
  // once a block that writes the output (not every head's lane pair).
  auto turns = [&]() {
    for (int k = MT - 1 - tid; k < nf; k += MT) rope_cs(p, invFreq[k], true, &rcs[0][k], &rcs[1][k]);
  };
  if (nch > 1) {
    // Write this chunk's sums; the token's last block adds them all.
#pragma unroll
    for (int h = 0; h < HG; ++h) {
      if (h >= hn) break;
      const long long row = (long long)t * heads + h0 + h;
#pragma unroll
      for (int m = 0; m < AFD_CH; ++m) {
        const int i = tid + m * MT;
        if (i < dim) po[(row * S + c) * dim + i] = o[m][h];
      }
    }
    if (tid < hn) {
      const long long row = (long long)t * heads + h0 + tid;
      pml[(row * S + c) * 2] = ml[tid];
      pml[(row * S + c) * 2 + 1] = ml[HG + tid];
    }
    __threadfence();
    __syncthreads();
    if (tid == 0) arrived = atomicAdd(ctr + t * HGn + y, 1u);
    __syncthreads();
    if (arrived != (unsigned)(nch - 1)) return;
    if (tid == 0) ctr[t * HGn + y] = 0;
    __threadfence();
    turns();
    // Every chunk's m_c and l_c at once, then warp h head h, lane u the
    // chunks u and u + 32 (their exponentials side by side, not one after
    // another): the chunk weights w_c = e^(m_c - M) and the denominator
    // e^(sink - M) + Σ w_c·l_c (each lane's chunks in order, then
    // warp_sum's order).
    for (int e = tid; e < hn * nch; e += MT) {
      const int h = e / nch, u = e - h * nch;
      const long long row = (long long)t * heads + h0 + h;
      wts[h][u] = __ldcg(pml + (row * S + u) * 2);
      lsum[h][u] = __ldcg(pml + (row * S + u) * 2 + 1);
    }
    __syncthreads();
    if (warp < hn) {
      const int h = warp;
      float M = __int_as_float(0xFF800000);
      for (int u = lane; u < nch; u += 32) M = fmaxf(M, wts[h][u]);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xFFFFFFFFu, M, o));
      float part = 0.0f;
      for (int u = lane; u < nch; u += 32) {
        const float w = exp_f(__fsub_rn(wts[h][u], M));
        wts[h][u] = w;
        part = __fmaf_rn(w, lsum[h][u], part);
      }
      part = warp_sum(part);
      if (lane == 0) den[h] = __fadd_rn(exp_f(__fsub_rn(sink[h0 + h], M)), part);
    }
    __syncthreads();
    // out = Σ_c w_c·o_c / d, the chunks' loads eight at a time in flight.
#pragma unroll
    for (int h = 0; h < HG; ++h) {
      if (h >= hn) break;
      const long long row = (long long)t * heads + h0 + h;
#pragma unroll
      for (int m = 0; m < AFD_CH; ++m) {
        const int i = tid + m * MT;
        float acc = 0.0f;
        if (i < dim) {
          const float* src = po + row * S * dim + i;
          for (int u0 = 0; u0 < nch; u0 += 8) {
            float v[8];
#pragma unroll
            for (int k = 0; k < 8; ++k) v[k] = u0 + k < nch ? __ldcg(src + (long long)(u0 + k) * dim) : 0.0f;
#pragma unroll
            for (int k = 0; k < 8; ++k)
              if (u0 + k < nch) acc = __fmaf_rn(wts[h][u0 + k], v[k], acc);
          }
        }
        o[m][h] = __fdiv_rn(acc, den[h]);
      }
    }
  } else {
    // out = o / (exp(sink - m) + l).
    turns();
#pragma unroll
    for (int h = 0; h < HG; ++h) {
      if (h >= hn) break;
      const float d = __fadd_rn(exp_f(__fsub_rn(sink[h0 + h], ml[h])), ml[HG + h]);
#pragma unroll
      for (int m = 0; m < AFD_CH; ++m) o[m][h] = __fdiv_rn(o[m][h], d);
    }
    __syncthreads();  // the turns
  }
  // The tail turned back (attn_combine's turn: rope_cs's values, then
  // rope_turn): channel pairs (i, i + 1), i - n0 even, are the lanes (tid,
  // tid + 1) of one warp (MT and n0 are even), each turning the pair and
  // keeping its own channel.
#pragma unroll
  for (int h = 0; h < HG; ++h) {
    if (h >= hn) break;
    const long long row = (long long)t * heads + h0 + h;
#pragma unroll
    for (int m = 0; m < AFD_CH; ++m) {
      const int i = tid + m * MT;
      float v = o[m][h];
      const float w = __shfl_xor_sync(0xFFFFFFFFu, v, 1);
      if (i < dim && i >= n0) {
        const int k = (i - n0) / 2;
        float x0, x1;
        rope_turn((i & 1) ? w : v, (i & 1) ? v : w, rcs[0][k], rcs[1][k], &x0, &x1);
        v = (i & 1) ? x1 : x0;
      }
      if (i < dim) out[row * dim + i] = v;
    }
  }
}

// attn_fd (4 heads a block), attn_fd_h2 and attn_fd_h8: attn_fd_body's
// entries (Backend.afdHeads; the A/Bs attn-fd-h2, attn-fd-h8).
#define AFD_ENTRY(SUF, HG)                                                                                            \
  extern "C" __global__ void __launch_bounds__(MT)                                                                   \
      attn_fd##SUF(float* out, const float* Q, const float* KV, const int* tab, int nspans, const int* pos, Paged win, \
                   int winSize, Paged comp, int hasComp, int rate, const int* sel, const int* cnt, int selK,          \
                   const float* sink, int heads, int dim, float scale, int maxKeys, float* po, float* pml,            \
                   unsigned* ctr, const float* invFreq, int nf) {                                                     \
    PDL_WAIT();                                                                                                       \
    attn_fd_body<HG>(out, Q, KV, tab, nspans, pos, win, winSize, comp, hasComp, rate, sel, cnt, selK, sink, heads,    \
                     dim, scale, maxKeys, po, pml, ctr, invFreq, nf);                                                 \
  }
AFD_ENTRY(, 4)
AFD_ENTRY(_h2, 2)
AFD_ENTRY(_h8, 8)
