// moep.cu: moe.cu's _sx expert products for tiles of 1 and 2 pairs with
// their weight loads in a shared-memory ring (ring.cuh) instead of
// registers: the same bits as the _sx entry of the same tile.
//
// Why: a tile of one pair is most of decode up to batch 16 at the Flash
// width (batch 1: 6 tiles a layer, batch 8: ~45), and there the _sx
// kernels read their FP4 weights at 1.0-1.4 TB/s (run 10). They hold the
// next step's 8 chunks in registers while computing the current ones:
// 160 registers a thread, one block of 8 warps an SM (2 warps a
// scheduler to hide the decode's dependent chains), and about 80 register
// moves in the loop (cuobjdump of the NVRTC 12.4 build: 1728 instructions
// in the loop body for a step of 256 weights a lane, the row group's
// epilogue included). Here a step is one chunk of each of the warp's NM·R
// rows, S - 1 steps of copies are in flight a thread, and the 121
// registers allow two blocks an SM. The instructions a weight stay about
// the same: what this can buy is latency hidden, not issue slots.
//
// Block (x, y), rows, tiles, activations staged in shared memory and the
// order of every sum: as moe_sx_body (moe.cu), with U = 1. Dynamic shared
// memory: the ring, S · NM·R · 256 · 16 bytes, then moeSXShared's
// activations (moepShared in moeops.go).

template <int FMT, int PT, int NM, int R, int S, int DEC>
__device__ __forceinline__ void moep_body(float* y, const float* x, int xDiv, const int* order, const int* idx,
                                          const int* chunks, const u64* tab1, const u64* tab3, int rows, int cols,
                                          int blockRows, int blockCols, int scaleCols, float L, int G) {
  typedef gemv_fmt<FMT> F;
  enum { NMR = NM * R, XP = (F::PER / 4) % 2 == 0 ? F::PER + 4 : F::PER, NT = 256 };
  DYN_SHARED(uint4, ring);                           // [S][NMR][NT]
  float* xsh = (float*)(ring + S * NMR * NT);        // moe_sx_body's
  __shared__ int sq[PT];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int q0 = chunks[2 * blockIdx.y], qn = chunks[2 * blockIdx.y + 1];
  if (qn == 0) return;
  if (tid < PT) sq[tid] = order[q0 + min(tid, qn - 1)];
  __syncthreads();
  const int e = idx[sq[0]];
  const long long rowBytes =
      FMT == FMT_F32 ? 4ll * cols : (FMT == FMT_FP8 ? (long long)cols : (FMT == FMT_FP4 ? cols / 2 : 2ll * cols));
  const int nch = (int)(rowBytes / 16);
  const int nj = (nch + 31) / 32;  // chunks a lane takes of each row: the steps of a row group
  const int xstride = nch * XP;
  const u8* wm[NM];
  const u8* sm[NM];
  wm[0] = (const u8*)tab1[2 * e];
  sm[0] = (const u8*)tab1[2 * e + 1];
  if (NM == 2) {
    wm[NM - 1] = (const u8*)tab3[2 * e];
    sm[NM - 1] = (const u8*)tab3[2 * e + 1];
  }
  const int gr0 = (blockIdx.x * G * 8 + warp) * R;  // first row of the warp's group 0
  int ng = 0;
  if (gr0 < rows) ng = min(G, (rows - gr0 + 8 * R - 1) / (8 * R));
  const int nsteps = ng * nj;
  auto slot = [&](int st, int m) -> uint4* { return ring + ((st * NMR + m) * NT + tid); };

  // issue queues step (g, j)'s copies (chunk c = lane + 32·j of each row
  // of group g) into stage st and commits them; an empty group past the
  // warp's last step.
  int ig = 0, ij = 0;
  auto issue = [&](int st) {
    if (ig < ng) {
      const int c = lane + 32 * ij, r0 = gr0 + ig * 8 * R;
      if (c < nch)
#pragma unroll
        for (int m = 0; m < NMR; ++m)
          ring_copy16(slot(st, m), (const uint4*)(wm[m / R] + (long long)min(r0 + m % R, rows - 1) * rowBytes) + c);
      if (++ij == nj) ij = 0, ++ig;
    }
    ring_commit();
  };
#pragma unroll
  for (int st = 0; st < S - 1; ++st) issue(st);

  // Stage the tile's activations (the weights' first copies are in flight).
  const int cols4 = cols / 4;
  for (int v = tid; v < qn * cols4; v += NT) {
    const int pi = v / cols4, k4 = v - pi * cols4;
    const float4 f = __ldg((const float4*)(x + (long long)(sq[pi] / xDiv) * cols) + k4);
    const int col = 4 * k4, c = col / F::PER;
    *(float4*)(xsh + pi * xstride + c * XP + (col - c * F::PER)) = f;
  }
  __syncthreads();
  if (nsteps == 0) return;

  float acc[NMR][PT];
#pragma unroll
  for (int m = 0; m < NMR; ++m)
#pragma unroll
    for (int pi = 0; pi < PT; ++pi) acc[m][pi] = 0.0f;
  int g = 0, j = 0;
  for (int t = 0, st = 0; t < nsteps; ++t) {
    // Step t's copies have landed; the stage issued now was last read at
    // step t - 1, by this thread.
    ring_wait<S - 2>();
    issue(st == 0 ? S - 1 : st - 1);
    const int c = lane + 32 * j, r0 = gr0 + g * 8 * R;
    if (c < nch) {
      u32 sraw[NMR];
#pragma unroll
      for (int m = 0; m < NMR; ++m)
        sraw[m] = chunk_scale_byte<FMT>(sm[m / R], min(r0 + m % R, rows - 1), c, cols, blockRows, blockCols, scaleCols);
      uint4 q[NMR];
#pragma unroll
      for (int m = 0; m < NMR; ++m) q[m] = *slot(st, m);
      float p[NMR][PT];
#pragma unroll
      for (int m = 0; m < NMR; ++m)
#pragma unroll
        for (int pi = 0; pi < PT; ++pi) p[m][pi] = 0.0f;
#pragma unroll
      for (int s = 0; s < F::SUBS; ++s) {
        float wv[NMR][F::SUB];
#pragma unroll
        for (int m = 0; m < NMR; ++m) decode_sub_dec<FMT, DEC>(q[m], s, wv[m]);
        const float* xc = xsh + c * XP + s * F::SUB;
#pragma unroll
        for (int pi = 0; pi < PT; ++pi) {
          if (pi < qn) {
            float xv[F::SUB];
#pragma unroll
            for (int jj = 0; jj < F::SUB / 4; ++jj) {
              const float4 f = *(const float4*)(xc + pi * xstride + 4 * jj);
              xv[4 * jj] = f.x; xv[4 * jj + 1] = f.y; xv[4 * jj + 2] = f.z; xv[4 * jj + 3] = f.w;
            }
#pragma unroll
            for (int m = 0; m < NMR; ++m)
#pragma unroll
              for (int k = 0; k < F::SUB; ++k) p[m][pi] = __fmaf_rn(wv[m][k], xv[k], p[m][pi]);
          }
        }
      }
#pragma unroll
      for (int m = 0; m < NMR; ++m) {
        const float scl = chunk_scale_from<FMT>(q[m], sraw[m]);
#pragma unroll
        for (int pi = 0; pi < PT; ++pi) acc[m][pi] = __fmaf_rn(p[m][pi], scl, acc[m][pi]);
      }
    }
    if (j == nj - 1) {  // the row group's last step: its outputs, as moe_sx_body
#pragma unroll
      for (int m = 0; m < NMR; ++m)
#pragma unroll
        for (int pi = 0; pi < PT; ++pi) acc[m][pi] = warp_sum(acc[m][pi]);
#pragma unroll
      for (int i = 0; i < R; ++i)
#pragma unroll
        for (int pi = 0; pi < PT; ++pi) {
          if (lane == (i * PT + pi) % 32 && pi < qn && r0 + i < rows) {
            const float v = NM == 2 ? swiglu_f(acc[i][pi], acc[R + i][pi], L) : acc[i][pi];
            y[(long long)sq[pi] * rows + r0 + i] = v;
          }
        }
#pragma unroll
      for (int m = 0; m < NMR; ++m)
#pragma unroll
        for (int pi = 0; pi < PT; ++pi) acc[m][pi] = 0.0f;
      j = 0, ++g;
    } else {
      ++j;
    }
    st = st == S - 1 ? 0 : st + 1;
  }
}

// moe_gateup_<fmt>_p<PT>_sxp and moe_down_<fmt>_p<PT>_sxp: moep_body's
// gate/up (2 rows of W1 and 2 of W3 a warp, SwiGLU fused) and down (4 rows
// of W2) products, the arguments of the _sx entries. Rings of S = 4
// stages: 64 KB.
#define MOEP_ENTRY(F, FMT, DEC, PT)                                                                              \
  extern "C" __global__ void __launch_bounds__(256, 2)                                                          \
      moe_gateup_##F##_p##PT##_sxp(float* h, const float* x, int xDiv, const int* order, const int* idx,        \
                                   const int* chunks, const u64* tab1, const u64* tab3, int rows, int cols,     \
                                   int blockRows, int blockCols, int scaleCols, float L, int G) { PDL_WAIT();   \
    moep_body<FMT, PT, 2, 2, 4, DEC>(h, x, xDiv, order, idx, chunks, tab1, tab3, rows, cols, blockRows,           \
                                     blockCols, scaleCols, L, G);                                                \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(256, 2)                                                          \
      moe_down_##F##_p##PT##_sxp(float* y, const float* x, int xDiv, const int* order, const int* idx,          \
                                 const int* chunks, const u64* tab2, const u64* unused, int rows, int cols,     \
                                 int blockRows, int blockCols, int scaleCols, float L, int G) { PDL_WAIT();     \
    moep_body<FMT, PT, 1, 4, 4, DEC>(y, x, xDiv, order, idx, chunks, tab2, unused, rows, cols, blockRows,         \
                                     blockCols, scaleCols, L, G);                                                \
  }
MOEP_ENTRY(fp4, FMT_FP4, 2, 1)
MOEP_ENTRY(fp4, FMT_FP4, 2, 2)
MOEP_ENTRY(fp8, FMT_FP8, 1, 1)
MOEP_ENTRY(fp8, FMT_FP8, 1, 2)
