// Package cuda runs strata's kernels on NVIDIA GPUs without cgo.
//
// The CUDA driver API (libcuda.so.1) and NVRTC (libnvrtc.so) are loaded at
// run time through purego, so `CGO_ENABLED=0 go build ./...` builds this
// package on every OS and architecture; where no driver can be loaded,
// [Open] fails with one error that says so (`cuda: no NVIDIA driver
// (libcuda.so.1): ...`). With cgo disabled, importing purego makes a
// binary dynamically linked against the C library (it needs dlopen); the
// build tag nocuda leaves purego out, for static binaries without GPUs.
//
// # Threading
//
// A CUDA context is current per OS thread, and the driver's state is not
// safe to touch from the goroutines Go moves between threads. A [Device]
// therefore owns one goroutine locked to its OS thread, and every CUDA call
// of the device is made there. [Device.Do] hands that goroutine a function
// that receives a [*Thread]; the Thread's methods call the driver directly,
// so a function that issues many launches pays the hop between goroutines
// once. A Thread is valid only inside the function it was passed to.
//
// # Kernels
//
// The kernels are CUDA C++ sources embedded from kernels/ and compiled by
// NVRTC at [Open] for the device's architecture (sm_90a on Hopper), one
// module per .cu file, in parallel; the cubins are cached under
// os.UserCacheDir()/strata/cuda, keyed by a hash of the source, the
// headers, the architecture, the NVRTC version and the options.
//
// # Numerics
//
// Matrix products read weights in their stored formats (compute.Matrix):
// every dequantized weight (stored value times its power-of-two scale) is
// exact in float32, and exact in bfloat16 for BF16, FP8 e4m3 and FP4 e2m1.
//
//   - [Strict] products compute in float32 on the CUDA cores (fused
//     multiply-adds), in a reduction order per output that depends only on
//     the matrix's shape, never on T or on the other tokens: they are
//     batch-invariant.
//   - [Fast] products of FP8 and BF16 weights for [GEMVXMinT] (2) to
//     [FastGEMVMaxT] (8) tokens take gemvx (kernels/gemvx.cu): the same
//     operands as gemmx below (exact bfloat16 weights, x = hi + lo), the
//     tokens as the 8 columns of mma.sync, every order fixed by K alone; one
//     token keeps the float32 kernel (it measured as fast or faster there).
//     Above FastGEMVMaxT tokens, gemmx (kernels/gemmx.cu) takes
//     weights that are bfloat16-exact (BF16, FP8, FP4): the activations
//     are split once as x = hi + lo with hi = bf16(x) and lo = bf16(x - hi)
//     (round to nearest even; error ~2^-17 of x), and the tensor cores
//     multiply the exact bfloat16 weights by hi and by lo into one float32
//     accumulator; K is cut into parts chosen from the matrix's shape alone
//     and the parts are added in order (whether one block or several
//     compute them). gemvx and gemmx are each batch-invariant, but a
//     token's result changes when T crosses a threshold between kernels
//     (1 to 2, 8 to 9 tokens).
//     Grouped products (GroupedMatMul) take gemmx's grouped form, and the
//     routed experts its experts' form when they average 32 pairs or more
//     (prefill; tiles of up to 64 pairs of one expert, K in one part).
//     FP4 experts averaging from half a pair to 32 pairs (decode batches
//     from about 22 tokens at the Flash width), and in tiles of one pair
//     from 16 tokens on, take the float16 tensor cores
//     (gemvx_moe_fp4_h: tiles of up to 8 pairs as the mma's columns,
//     SwiGLU fused): every weight exact as e2m1·2^-6 in float16, its
//     UE8M0 scale applied in float32 to each 32-column block's mma sums;
//     every activation row scaled by a power of two (its largest
//     magnitude into [2^14, 2^15)) and split as x = hi + lo, both float16
//     (error ~2^-22 of the row's values; gvxh_split), the sums float32.
//     Tiles of one pair below that (batches 1 to 21 at the Flash width)
//     take moeq (kernels/moe.cu, Backend.moeQ): the integer dot products,
//     each code an exact int8 2·e2m1, each 32-column block of a pair's
//     activations scaled by a power of two and rounded to a 22-bit
//     integer (error at most 2^-22 of the block's largest value) carried
//     as three int8 digits; the block's sum is exact in int32, converted
//     to float32 once, and added in float32 in an order fixed by the
//     shape (run 14: batch 1 5% and batch 8 20% faster a step than the
//     float32 kernels, batch 16 14% faster than gemvx_moe_fp4_h; mean KL
//     against the float32 experts 2e-12 to 3e-11); its moe_down launches
//     early (PDL), the tiles' first weights in flight before it waits for
//     the gate/up product (run 20: batch 1 2.1-3.0% faster a step), and
//     at one token moe_gateup stages the token's activations before it
//     waits for the routing (1.3%). Backend.moeM
//     (off) gives moem instead (kernels/moem.cu: the same digits, base 16,
//     on wgmma's e4m3 tensor cores; run 20 measured it 10-12% slower a
//     batch-1 step: latency-bound at 18% occupancy). Other experts
//     (another format or width) take the float32 grouped kernels there.
//     Backend.moeH off gives gemvx's experts' form instead
//     (gemvx_moe_fp4 and its ring: exact bfloat16 weights, bfloat16
//     hi + lo). F32 and F16 weights keep the float32 kernel.
//     Run 8's fast path (split_bf16, the tensor-core kernel of gemm.cu on
//     hi and on lo, the two products added; moe_gemm for experts averaging
//     32 pairs) is still there, measured beside it (NOTES.md, run 9).

// In Fast mode, attention of 2 to 8 tokens takes attn_tc (kernels/attn.cu):
// one launch on the bfloat16 tensor cores, queries, keys and probabilities
// each split as hi + lo (~2^-17), each chunk of 64 keys against its own
// maximum and the chunks added by the token's last block; batch-invariant
// among the batches that take it, not the CPU's bits (run 27, H100:
// within 5e-06 of the float64 definition's sum of magnitudes; a batch-8
// step 0.6-2.1% faster in two calls, a batch-1 step 7-9% slower, so one
// token keeps the float32 kernels).
//
// Attention, the hyper-connection mix and the grouped products are split
// over blocks by shape alone (attention: chunks of 32 keys, a token's
// chunk sums added in chunk order whether one block or many computed
// them; the shorter logit chunks and half-head value blocks of launches of
// a few blocks change no value), so that in Strict mode every kernel is
// batch-invariant.
//
// Backend also implements compute.Branches: a step's independent chains
// (DeepSeek-V4's kv and compressor, its indexer's keys, its queries beside
// the indexer's top-k, the window ring's store) record on streams of
// their own, forked from and joined to the main stream by events, and a
// captured graph holds them as parallel paths; the MoE op puts its shared
// expert on a lane of the backend's own (laneShared) beside the routing
// and the routed experts. The values are those of one stream
// (TestBackendBranches); run 14 measured one stream 9.3% / 4.7% / 3.6%
// slower at batches 1 / 8 / 64. And compute.Prefetcher (l2_prefetch,
// cp.async.bulk.prefetch.L2), off by default: run 10 measured it no
// faster (NOTES.md).
//
// And compute.Submitter: Submit flushes what is recorded (one graph per
// recurring recording) without waiting, so DeepSeek-V4's forward has the
// GPU run a layer while the host records the next (run 13: a batch-1
// step 8.0% faster). The device goroutine and its callers spin up to 5 ms
// before they sleep (a small batch's whole step; 100 and 50 us were 3.5%
// slower at batch 1).
//
// Backend also implements compute.MultiMatMul: products of one input
// with the same format, width and GEMV split go up to four a launch
// (gemvm, kernels/gemv2.cu), each block computing as the product's own
// launch would, so the bits are MatMul's (NOTES.md, run 7).
//
// Three kernels keep their weight loads in flight through a ring in
// shared memory (kernels/ring.cuh, cp.async) with persistent blocks, each
// giving the bits of the kernel it replaces (NOTES.md, sessions 11 and
// 12): gemvp (kernels/gemvp.cu, Kernels.gemvpV) computes the FP8 products
// of one token (run 11: 2.3-2.9 TB/s against gemv2's 1.5-2.0, a batch-1
// step 6.7% faster); gemvxp (gemvxp_fp8 in kernels/gemvx.cu,
// Kernels.gemvxpCols) gemvx's FP8 products of 2 to 8 tokens up to 1024
// columns (faster there, slower on wider rows); and moep (moep_body in
// kernels/moe.cu, Backend.moeSXP) the experts of tiles of 1 and 2 pairs
// at batches of more than one token (batch 8 4.5% faster a step; in Fast
// mode FP4 experts take moeq instead, its weights in the same kind of
// ring).
//
// Every kernel opens with PDL_WAIT (kernels/common.cuh), so that launches
// may allow programmatic dependent launch: the results are the same
// either way. By default only the kernels that load weights before they
// wait (gemvp, gemv2, and hc_post_pre its mix weights) allow it
// (Backend.SetPDLEarly; a batch-1 step 1.5-1.8% faster, NOTES.md run 15);
// every launch with STRATA_CUDA_PDL=1
// (Backend.SetPDL: slower on the H200, run 6), none with STRATA_CUDA_PDL=0.
//
// The mHC of two sites is one launch (hc_post_pre in kernels/model.cu,
// compute.FusedMixing): a site's write-back, the next site's mix, pre,
// post and comb, and its RMS norm, the same bits as the four kernels
// (Backend.hcFusedOff). SparseAttention turns its output back in
// attn_combine (AttentionArgs.OutRoPE: run 19, a batch-1 step 1.7-2.1%
// faster than rope_heads after it).
//
// RMSNorm, RoPE, Softmax, TopK and Gather compute as the CPU backend does
// (float32, with float64 where the CPU uses it), up to the order of their
// float32 sums; TopK and Gather are exact.
package cuda
