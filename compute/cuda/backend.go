package cuda

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/strata-inference/strata/compute"
)

var (
	_ compute.Backend     = (*Backend)(nil)
	_ compute.FusedMixing = (*Backend)(nil)
	_ compute.HostMemory  = (*Backend)(nil)
)

// pdlDefault is SetPDL's default: off (run 6 measured PDL 2-4% slower
// per decode step), on with STRATA_CUDA_PDL=1.
func pdlDefault() bool { return os.Getenv("STRATA_CUDA_PDL") == "1" }

// pdlEarlyDefault is SetPDLEarly's default: on (run 15: a batch-1 step
// 1.5-1.8% faster in three calls, batch 8 -0.1% to +0.6%), off with
// STRATA_CUDA_PDL=0.
func pdlEarlyDefault() bool { return os.Getenv("STRATA_CUDA_PDL") != "0" }

// Backend is a compute.Backend on one GPU: every tensor is device memory,
// weights are uploaded once in their stored formats, and every op is a
// kernel.
//
// Ops do not call CUDA as they are made: they record their launches (on
// the caller's goroutine), and the recording is flushed to the device's
// thread in one Device.Do at the next transfer (Write, Read, Copy), Sync,
// Free or full ResetScratch. A recording that recurs with the same
// launches and parameters (a decode step of an unchanged batch: the step's
// metadata is written to the same scratch addresses before it, and every
// kernel reads it from there) is captured into a CUDA graph the second
// time and replayed from the graph after that.
//
// Errors of queued work surface at the next Read or Sync, and stick.
type Backend struct {
	dev  *Device
	own  bool
	k    *Kernels
	mode Mode
	ctx  context.Context

	rec    recording
	rt     *Thread // records launches
	graphs bool
	gc     graphCache
	stats  Stats

	err error

	arena    *buffer
	off      int64 // scratch bytes handed out since the last full reset
	peak     int64
	overflow []*buffer // scratch beyond the arena, freed at the next full reset

	allocs map[*buffer]struct{} // Alloc and Vector memory, freed at Close
	// hostBufs: HostFloats' page-locked memory, freed at Close;
	// noHostMem (STRATA_CUDA_PAGEABLE=1) turns HostFloats off.
	hostBufs  []HostBuf
	noHostMem bool
	mats      []*Matrix
	moeTabs   map[*compute.Matrix]*moeTables
	// hcCnt: hc_post_pre's counters (HCPostPreNorm), attcCnt attn_tc's
	// and afdCnt attn_fd's (SparseAttention), freed at Close.
	hcCnt, attcCnt, afdCnt Ptr
	// gemvpChainOn: GroupedMatMulThen takes gemvp_fp8_u2s3_chain where it
	// can (A/B gemvp-chain). Off: run 29 measured a batch-1 step 1.2-1.7%
	// slower with it (H100). chainCtr is its counters, chainLaunches
	// counts its launches (tests).
	gemvpChainOn  bool
	chainCtr      Ptr
	chainLaunches int
	// groupTabs are GroupedMatMul's tables, by the group's first matrix.
	groupTabs map[*compute.Matrix]groupTab
	optin     int // dynamic shared memory a block may use
	// moeRun3: the grouped expert kernels' run-3 entries for tiles of 2
	// pairs (the same bits; BenchmarkFlash measures both).
	moeRun3 bool
	// moeOcc > 0: FP4 tiles of 1 pair take moe.cu's _o<moeOcc> entries
	// (launch bounds of moeOcc blocks an SM; the same sums).
	moeOcc int
	// moeR8: the grouped expert kernels of run 8 (moe_grouped_body, and
	// moeTile's tiles of 2 pairs up to 2 pairs an expert) instead of the
	// _sx entries; the same bits (BenchmarkFlash's moe-r8 A/B).
	moeR8 bool
	// moePT > 0 forces the grouped expert kernels' tile (1, 2, 4 or 8
	// pairs) instead of moeTile's: tests run every tile on one batch.
	moePT int
	// moeP1R8: tiles of 1 pair (batches up to E/K tokens) take run 8's
	// grouped kernels instead of the _sx entries; the same bits
	// (BenchmarkFlash's moe-p1-r8 A/B; run 9: 1.5-1.9% slower a step).
	moeP1R8 bool
	// attnLogits32: tiny attention launches take logits chunks of 32 keys
	// (attnChunk) instead of attnLogitChunk (the same logits; the
	// attn-lkc32 A/B).
	attnLogits32 bool
	// attnValuesWhole: tiny attention launches give each block of
	// attn_values all of a head's channels instead of half (the same
	// sums; the attn-values-whole A/B).
	attnValuesWhole bool
	// normRoPEOff: RMSNormRoPE runs RMSNorm and RoPE as two launches
	// instead of rmsnorm_rope (the same bits; the norm-rope-off A/B).
	normRoPEOff bool
	// hcFusedOff: HCPostPreNorm runs HCPost, HCPre and RMSNorm as their
	// own launches instead of hc_post_pre (the same bits; the
	// hc-fused-off A/B).
	hcFusedOff bool
	// routeSortOff: a token's MoE routing and sort as moe_route_b and
	// moe_sort instead of moe_route_sort (the same results; the
	// route-sort-off A/B).
	routeSortOff bool
	// hcLate: hc_post_pre launches as other kernels do instead of early
	// (LaunchEarly: its mix weights in flight while the kernel before it
	// finishes; the hc-late A/B, the same bits).
	hcLate bool
	// hcFusedLaunches counts hc_post_pre's launches (tests).
	hcFusedLaunches int
	// moeSXP: FP4 and FP8 tiles of 1 and 2 pairs take moe.cu's _sxp
	// entries (the weight loads in a shared-memory ring) instead of the
	// _sx ones where the batch has more than one token; the same bits.
	// On by default: run 11 (BenchmarkFlash's moe-sxp A/B) timed batches
	// 8 and 16 4.5% and 6.3% faster a step with it, but batch 1 1.9%
	// slower (its few tiles leave the second block an SM idle).
	moeSXP bool
	// routeR8: routing takes run 8's moe_route (one warp a token) instead
	// of moe_route_b (a block a token); the same results.
	routeR8 bool
	// attnScalar: attention decodes its keys channel by channel (run 5's
	// loads) instead of ATT_G channels a load; the same values.
	attnScalar bool
	// unmulti: MatMuls launches one product at a time (run 6's launches)
	// instead of gemvm's groups; the same values.
	unmulti bool
	// gemmR8: Fast products above FastGEMVMaxT tokens take run 8's three
	// launches (split_bf16, gemm.cu twice, add_repeated; grouped products
	// a group at a time) instead of gemmx (other bits: one accumulator
	// for hi and lo, K in parts).
	gemmR8 bool
	// moeXOff: the routed experts above FastGEMVMaxT take run 8's kernels
	// (moe_gemm or the float32 ones) while the dense products keep gemmx.
	moeXOff bool
	// moeXAll: gemmx_moe takes the experts at every batch above
	// FastGEMVMaxT, not only from moeTCPairsPerExpert pairs an expert
	// (tests; run 9: 37.1 ms a step at batch 64 against 21.0).
	moeXAll bool
	// attnHG4: attention takes 4 heads a block at every batch (run 8's
	// kernels) instead of 16 at large ones; the same values.
	attnHG4 bool
	// attnHG16: attention takes 16 heads a block at every batch (tests).
	attnHG16 bool
	// attnTiledOff: attention takes attn_logits and attn_values (4 or 16
	// heads a block, the flags above) instead of the tiled attn_qk and
	// attn_pv; the same bits (the attn-tiled-off A/B).
	attnTiledOff bool
	// attnTiledCalls counts the SparseAttention calls that took them (tests).
	attnTiledCalls int
	// attnRoPEApart: SparseAttention turns its output back (OutRoPE) with
	// rope_heads after the attention instead of in attn_combine (tests,
	// the attn-rope-apart A/B: the same bits).
	attnRoPEApart bool
	// attnTurnLaunches counts the attn_combine launches that turned (tests).
	attnTurnLaunches int
	// attnTCOff: Fast attention of attnTCMinT to attnTCMaxT tokens takes
	// the split float32 kernels (Strict's) instead of attn_tc (the
	// attn-tc-off A/B); attnTCLaunches counts attn_tc's launches (tests);
	// attnTCMinT is the fewest tokens that take it (attnTCMinT; 1 in tests
	// and the attn-tc-t1 A/B).
	attnTCOff      bool
	attnTCLaunches int
	attnTCMinT     int
	// attnFDMaxT: Fast attention of 1 to attnFDMaxT tokens takes attn_fd
	// (one launch of float32 flash-decoding) before attn_tc or the split
	// kernels; 0 (the default: run 31 measured a batch-1 step 4.7-5.6%
	// slower with it at 1, 5.2-7.8% at batch 8 with 8; H100) never. The A/Bs
	// attn-fd (1) and attn-fd8 (8) and the tests set it; attnFDLaunches
	// counts attn_fd's launches (tests).
	attnFDMaxT     int
	attnFDLaunches int
	// afdHeads: attn_fd's heads a block, 4 (afdHeads) or 2 or 8 (the A/Bs
	// attn-fd-h2 and attn-fd-h8: the same bits whatever it is).
	afdHeads int
	// hcDiag: hc_post_pre's diag argument (model.cu's HC_DIAG_*: parts
	// dropped, for BenchmarkFlash's diag-hc-* timing lines only; 0, the
	// default, drops nothing).
	hcDiag int
	// hcClock: when set, hc_post_pre's clk argument (model.cu's hc_stamp:
	// token 0's timeline, for BenchmarkFlash's hcclock lines only): launch
	// n writes slot n mod hcClockSlots of HC_CLK_STRIDE uint64s.
	hcClock                Ptr
	hcClockSlots, hcClockN int
	// hcWarm: hc_post_pre's grid has two dry blocks (model.cu's HC_WARM)
	// that fetch the code of its two tails ahead of them; the same
	// outputs. Off until measured (A/B hc-warm).
	hcWarm bool
	// topkFix: IndexerSelect's top-k kernel also counts the selection and
	// gives the tokens with at most TopK entries all of them (topk_sel),
	// one launch fewer on a CSA layer's critical path than topk then
	// indexer_fix; the same output. Off (A/B topk-fix): run 31 measured
	// -0.2% to +0.1% on 4 layers with one CSA layer (H100), within the
	// noise.
	topkFix bool
	// attnNoSplit: every attention launch loops over a token's key chunks
	// in one block (the path of large batches) instead of splitting them
	// over blocks at small ones (tests: the same bits).
	attnNoSplit bool
	// attnQK4: launches past the tiny layout keep attn_qk (tiles of 4
	// keys a warp) instead of attn_qk8 (8 keys: the same bits; A/B
	// attn-qk-tk4).
	attnQK4 bool
	// attnQKKB > 0: attn_qk's chunk of keys at launches past the tiny
	// layout instead of attnChunk (A/B attn-qk-kb16, attn-qk-kb8: a
	// logit does not depend on the chunks, so the same bits; smaller
	// chunks take less shared memory, more blocks an SM).
	attnQKKB int
	// attnTinyT > 0: the tiled kernels' small-launch layout up to that
	// many tokens instead of attnTiledTiny's (the attn-tiny-8 A/B).
	attnTinyT int
	// attnTinyDS > 0: the tiled small-launch layout splits a head's channels
	// over that many attn_pv blocks (2 or 4) instead of 2 (the
	// attn-pv-ds4 A/B).
	attnTinyDS int
	// attnQKHB8: attn_qk takes 8 heads a block at small launches (twice
	// the blocks; A/B attn-qk-hb8: run 21 call 4 +1.4% at batch 1).
	// attnQKTiles: its blocks have one warp a tile (run 20's; A/B
	// attn-qk-tiles) instead of opThreads, the default, whose extra warps
	// spread the queries' and keys' loads. The same logits either way.
	attnQKHB8   bool
	attnQKTiles bool
	// attnCombineR21: attn_combine in run 21's form (the partials loaded 8
	// chunks at a time, the denominator's and then each channel's)
	// instead of every load at once (the same bits; A/B attn-combine-r21).
	attnCombineR21 bool
	// indexerR21: the index scores by run 21's indexer_scores_r21 (one
	// round trip after another for the queries and each key) instead of
	// indexer_scores (the same bits; A/B indexer-r21).
	indexerR21 bool
	// indexerR25: the index scores by run 25's indexer_scores_r25 (the
	// query's channels read again for each key, each key's heads summed
	// on one lane) instead of indexer_scores (the same bits; A/B
	// indexer-r25).
	indexerR25 bool
	// topkR26: IndexerSelect's top-k by topk (the row read from memory in
	// each pass) also where topkRegPays takes topk_reg4 or topk_reg (held
	// in registers): the same output (A/B topk-r26).
	topkR26 bool
	// indexerIPW, when positive, is the entries a warp of indexer_scores
	// takes instead of indexerPerWarp's (tests; A/B indexer-ipw8 and
	// indexer-ipw2).
	indexerIPW int
	// hcSlots, hcSlotsO4: how many blocks of hc_post_pre and of
	// hc_post_pre_o4 the device holds at once (residentSlots). A token's
	// next-to-last block waits for its last, so a launch of T tokens may
	// hold T waiting blocks: HCPostPreNorm takes a kernel only for T below
	// its slots (else the three ops, the same bits), so that the last
	// blocks always find room.
	hcSlots, hcSlotsO4 int
	// hcO2: HCPostPreNorm keeps hc_post_pre (two blocks an SM) at every
	// batch instead of taking hc_post_pre_o4 (four) from hcO4MinT tokens:
	// the same bits; run 23 measured hc_post_pre_o4 0.0% / 0.7% / 2.4%
	// faster a step at batches 8 / 64 / 256 (A/B hc-o4, now hc-o2).
	// hcO4MinT, when not 0, replaces the constant (tests).
	hcO2     bool
	hcO4MinT int
	// br are the backend's branches (branch.go).
	br branches
	// noPrefetch: Prefetch does nothing. The default: run 10 measured the
	// prefetches 0.4-0.9% slower a step at batches 1 to 64 (the products
	// they feed are bound by their instructions, not by HBM);
	// BenchmarkFlash's prefetch-on A/B measures them.
	noPrefetch bool
	// gemvxOff: Fast products of FP8 and BF16 weights for up to 8 tokens
	// take the float32 GEMV (run 9's) instead of gemvx (other bits);
	// gemvxNoBF16 only those of BF16 weights (the output head).
	gemvxOff, gemvxNoBF16 bool
	// gemvh: Fast FP8 products of one token take gemvh (the float16
	// tensor cores, other bits) instead of the float32 GEMV (gemvp,
	// gemv2's bits). Off until measured faster: run 17's first version
	// took a batch-1 step 10.8% longer, its second 1.7% (BenchmarkFlash's
	// gemvh A/B).
	gemvh bool
	// gemvhMinTiles: one-token products of fewer tiles of 16 rows (all
	// groups) take gemvp instead of gemvh (0: none; the gemvh-min128
	// A/B).
	gemvhMinTiles int
	// gemvhLaunches counts the gemvh launches recorded (tests).
	gemvhLaunches int
	// gemvxMoeOff: Fast FP4 experts in tiles of 2 pairs or more take the
	// float32 _sx kernels (run 9's) instead of gemvx_moe_fp4 (other bits).
	gemvxMoeOff bool
	// gemvxMoeMinPT is the smallest tile of the float32 kernels that
	// gemvx_moe_fp4 replaces (2; 1 takes it at every decode batch), beside
	// from half a pair an expert on.
	gemvxMoeMinPT int
	// gemvxMoeU4: gemvx_moe_fp4's _u4 entry (4 steps in flight a lane
	// instead of 2; the same bits).
	gemvxMoeU4 bool
	// gvxrV indexes gvxrStages: gemvx_moe_fp4's products through
	// gemvx_moe_fp4_ring (persistent, loads in a ring; the same bits), or
	// 0 for gemvx_moe_fp4.
	gvxrV int
	// moeQ (the default): Fast FP4 experts that moe.cu's grouped kernels
	// take (below half a pair an expert) run on the integer dot products
	// (moeq_body: int8 codes, the activations as three int8 digits of a
	// 22-bit integer a 32-column block; other bits than the float32 _sx
	// entries, BenchmarkFlash's moeq-off A/B).
	moeQ bool
	// moeqS4: tiles of one pair take moeq's _q4 entries (rings of 4
	// stages, 2 blocks an SM: run 14's first) instead of 3 stages at 3
	// blocks an SM; the same bits (moeq-s4 A/B).
	moeqS4 bool
	// moeqPF: each moeq block asks the L2 for all its rows of its
	// expert's matrices as soon as it knows the expert (moe_down before
	// its wait), deeper than its ring; the same bits (moeq-pf A/B). Off:
	// run 29 measured batches 1 and 8 2.7% and 12.5% slower with it
	// (H100).
	moeqPF bool
	// moeHTiles: tiles of one pair take gemvx_moe_fp4_h from moeHMinT
	// tokens on even where moeq fits (run 13's choice; the gvxh-16 A/B).
	moeHTiles bool
	// moeQGX: moeq takes the FP4 experts wherever gemvx's experts' form
	// would (tiles of up to 8 pairs; the moeq-gx A/B).
	moeQGX bool
	// hcReduceApart: hc_mix_reduce sums the partials from global memory
	// 8 segments a wait (run 20's) instead of staging them all at once
	// (the same bits; TestBackendHCHead).
	hcReduceApart bool
	// moeqG > 0: the row groups a block of the moeq entries takes (the
	// moeq-g1 and moeq-g4 A/Bs; the bits do not depend on it).
	moeqG int
	// moeqLaunches counts the moeq launches recorded (tests).
	moeqLaunches int
	// moeM: where moeq would take the FP4 experts, moem.cu's entries take
	// them on the FP8 tensor cores instead (wgmma, sm_90a; other bits;
	// BenchmarkFlash's moem A/B). Off: run 20 measured the step 9.5%
	// slower at batch 1 and 24% at batch 8 with it (moem.cu says why).
	// moemLaunches counts their launches (tests).
	moeM         bool
	moemLaunches int
	// moeDownEarly (the default): moeq's moe_down launches early (PDL),
	// its weights' first copies in flight before it waits for the gate/up
	// product (BenchmarkFlash's moe-down-late A/B).
	moeDownEarly bool
	// moeGateupEarly (the default): moeq's moe_gateup for one token's
	// tiles of one pair launches early, that token's activations staged
	// before it waits for moe_route_sort (A/B moe-gateup-late).
	moeGateupEarly bool
	// moemG > 0: the row tiles a block of the moem entries takes (tests:
	// the bits do not depend on it).
	moemG int
	// moeH (the default): Fast FP4 experts on the float16 tensor cores
	// (gemvx_moe_fp4_h, activations split into float16 hi + lo) wherever
	// gemvx_moe_fp4 would run, and from moeHMinT tokens on (other bits).
	moeH bool
	// sharedOnMain: MoE's shared expert on the main stream after the
	// routed experts (run 12's schedule; BenchmarkFlash's moe-shared-main
	// A/B), not on laneShared beside them. The same values.
	sharedOnMain bool
	// noSubmit: Submit does nothing, a decode step is one recording
	// (run 13's first calls; BenchmarkFlash's submit-off A/B). The same
	// values.
	noSubmit bool
	// submitFirst: Submit flushes only the first layer after any other
	// flush, so that a decode step is two recordings (and, replayed, two
	// graphs) rather than one a layer: the GPU starts on the first layer
	// while the host records the rest, and the layers after it run in one
	// graph, without a graph's boundary between each two (A/B
	// submit-first; off: run 31 measured +0.6% / -0.1% at batches 1 / 8,
	// 4 layers, H100). submitted says that the
	// last flush was Submit's. The same values.
	submitFirst, submitted bool

	closed bool

	// profile, when set, times every launch with events (no graphs).
	profile *Profile
	events  []Event
	prof    []*launchRec // flushProfiled's launches
}

// Profile is the GPU time of each kernel over the flushes it was on for.
type Profile struct {
	Kernels map[string]*KernelTime
	// Order is every launch timed, in the order queued.
	Order []LaunchTime
}

// LaunchTime is one timed launch: its kernel, grid and GPU time.
type LaunchTime struct {
	Name string
	Grid Dim3
	Ms   float64
}

// KernelTime is one kernel's launches and their total GPU time.
type KernelTime struct {
	Launches int
	Ms       float64
}

// Stats counts what a Backend has queued.
type Stats struct {
	Flushes, Launches       int64 // recordings flushed, kernels launched directly
	GraphLaunches, Captures int64 // recordings replayed from a graph, graphs captured
	Forks                   int64 // branch forks recorded (Branch)
	// Record is the host time from each recording's first launch to its
	// flush (the ops' own work: the GPU waits for it unless it still runs
	// earlier work); Flush the device thread's time in the flushes before
	// it waits for the GPU (the recording's key, the graph lookup, the
	// launches).
	Record, Flush time.Duration
}

// buffer is device memory.
type buffer struct {
	p Ptr
	n int64
}

func (b *buffer) Bytes() int64 { return b.n }

// initialArena is the first scratch arena; it grows at a full reset to what
// the steps before needed.
const initialArena = 64 << 20

// NewBackend opens device opts.Ordinal and returns a Backend on it that
// computes in mode; Close closes the device too. Without a driver the
// error wraps ErrNoDriver.
func NewBackend(ctx context.Context, opts Options, mode Mode) (*Backend, error) {
	dev, err := Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	b, err := NewBackendOn(dev, mode)
	if err != nil {
		dev.Close()
		return nil, err
	}
	b.own = true
	return b, nil
}

// NewBackendOn returns a Backend on an open device, which Close leaves
// open (several Backends may share a device, one goroutine each).
func NewBackendOn(dev *Device, mode Mode) (*Backend, error) {
	b := &Backend{dev: dev, k: dev.Kernels(), mode: mode, ctx: context.Background(), graphs: true, noPrefetch: true, gemvxMoeMinPT: 2, moeSXP: true, gvxrV: gvxrVDefault, moeH: true, moeQ: true, moeDownEarly: true, moeGateupEarly: true,
		gc: graphCache{limit: 64}, allocs: map[*buffer]struct{}{}, moeTabs: map[*compute.Matrix]*moeTables{},
		groupTabs: map[*compute.Matrix]groupTab{}}
	b.rt = newRecorder(&b.rec)
	b.rt.pdl = pdlDefault()
	b.rt.pdlEarly = pdlEarlyDefault()
	b.noHostMem = os.Getenv("STRATA_CUDA_PAGEABLE") == "1"
	if os.Getenv("STRATA_CUDA_PDL") == "small" {
		b.rt.pdlSmall = dev.Props().SMs
	}
	b.attnTCMinT = attnTCMinT
	b.afdHeads = afdHeads
	// STRATA_CUDA_ATTN_FD=N: attn_fd for Fast attention of up to N tokens
	// (a GPU call's tests run it so before it is on by default).
	if n, err := strconv.Atoi(os.Getenv("STRATA_CUDA_ATTN_FD")); err == nil && n > 0 {
		b.attnFDMaxT = n
	}
	// STRATA_CUDA_TOPK_FIX=1: topk_sel for IndexerSelect (likewise).
	b.topkFix = os.Getenv("STRATA_CUDA_TOPK_FIX") == "1"
	// The opt-in covers static and dynamic shared memory together: leave
	// the kernels' static buffers (a few hundred bytes) their room.
	b.optin = dev.Props().SharedPerBlockOptin - 1024
	if b.optin < 47<<10 {
		b.optin = 47 << 10
	}
	err := dev.Do(b.ctx, func(t *Thread) error {
		names := []string{"attn_logits", "attn_values", "attn_logits_h16", "attn_values_h16", "attn_qk", "attn_qk8", "attn_pv4", "attn_pv8", "attn_tc", "attn_fd", "attn_fd_h2", "attn_fd_h8", "indexer_scores", "indexer_scores_r21", "indexer_scores_r25", "compress_emit", "round_trip", "moe_sort", "gemvx_moe_fp4_ring", "gemvx_moe_fp4_ring3", "gemvx_moe_fp4_h"}
		names = append(names, moeSXKernels...)
		for _, name := range names {
			if f := b.k.fns[name]; f != 0 {
				n := b.optin
				if strings.HasSuffix(name, "_h16") || strings.HasPrefix(name, "attn_pv") {
					n -= 4 << 10 // attn_values_h16's static arrays take 2.2 KB, attn_pv's 2.2
				}
				if strings.HasPrefix(name, "attn_fd") {
					n -= afdStatic
				}
				if err := t.SetMaxDynamicShared(f, n); err != nil {
					return fmt.Errorf("cuda: %s: %w", name, err)
				}
			}
		}
		b.hcSlots = residentSlots(t, b.k.fns["hc_post_pre"], dev.Props().SMs)
		b.hcSlotsO4 = residentSlots(t, b.k.fns["hc_post_pre_o4"], dev.Props().SMs)
		p, err := t.Alloc(initialArena)
		if err != nil {
			return err
		}
		b.arena = &buffer{p: p, n: initialArena}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Device returns the backend's device.
func (b *Backend) Device() *Device { return b.dev }

// SetGraphs turns the capture and replay of recurring recordings on or off
// (on by default).
func (b *Backend) SetGraphs(on bool) { b.graphs = on }

// SetPDL turns programmatic dependent launch on or off for the launches
// recorded from now on (off by default; STRATA_CUDA_PDL=1 turns it on): a
// kernel may launch while the one before it finishes, and waits for it
// in PDL_WAIT (common.cuh) before it touches memory, so that results do
// not change, only the gaps between kernels.
func (b *Backend) SetPDL(on bool) { b.rt.pdl = on }

// SetPDLEarly turns programmatic dependent launch on or off (on by
// default: pdlEarlyDefault) for the launches recorded from now on of the
// kernels that load weights before they wait (gemvp, gemv2, hc_post_pre:
// Thread.LaunchEarly), whatever SetPDL says: each such product may start,
// its first weights in flight, while the kernel before it finishes (every
// kernel opens with PDL_WAIT and triggers its dependents there).
func (b *Backend) SetPDLEarly(on bool) { b.rt.pdlEarly = on }

// SetPDLSmall has launches of at most n blocks (0: none) recorded from now
// on allow programmatic dependent launch, whatever SetPDL says: a small
// kernel may start while the one before it finishes, its blocks waiting
// in room the other leaves (STRATA_CUDA_PDL=small: n = the SMs). Off
// by default and not yet measured on the H200 (A/B pdl-small; run 15's
// last call got no machine).
func (b *Backend) SetPDLSmall(n int) { b.rt.pdlSmall = n }

// PDL reports whether launches allow programmatic dependent launch.
func (b *Backend) PDL() bool { return b.rt.pdl }

// Stats returns the counts of what the backend has queued so far.
func (b *Backend) Stats() Stats { return b.stats }

// Mode returns the backend's numerics.
func (b *Backend) Mode() Mode { return b.mode }

// Name implements compute.Memory.
func (b *Backend) Name() string {
	m := "strict"
	if b.mode == Fast {
		m = "fast"
	}
	return fmt.Sprintf("cuda:%d (%s, %s)", 0, b.dev.Props().Name, m)
}

// fail keeps the first error.
func (b *Backend) fail(err error) {
	if err != nil && b.err == nil {
		b.err = err
	}
}

// do runs fn on the device thread after the recorded launches, keeping the
// first error.
func (b *Backend) do(fn func(t *Thread) error) error {
	if b.closed {
		b.fail(errors.New("cuda: backend used after Close"))
		return b.err
	}
	b.submitted = false
	err := b.dev.Do(b.ctx, func(t *Thread) error {
		if err := b.flushOn(t); err != nil {
			return err
		}
		if fn != nil {
			return fn(t)
		}
		return nil
	})
	b.fail(err)
	return err
}

// flushOn launches the recorded work on t's stream: from a cached graph
// when this recording was captured, capturing it when it was seen once
// before, else directly.
func (b *Backend) flushOn(t *Thread) error {
	if len(b.rec.launches) == 0 {
		return nil
	}
	b.joinLanes() // a flush ends with every lane joined
	t0 := time.Now()
	if !b.rec.t0.IsZero() {
		b.stats.Record += t0.Sub(b.rec.t0)
		b.rec.t0 = time.Time{}
	}
	err := b.flushRecorded(t)
	b.stats.Flush += time.Since(t0)
	b.rec.launches, b.br.scanned = b.rec.launches[:0], 0
	if lane := int(b.rt.lane); lane > 0 {
		b.fork(lane) // the current lane goes on after what was flushed
	}
	return err
}

func (b *Backend) flushRecorded(t *Thread) error {
	s := t.Stream()
	b.stats.Flushes++
	if b.profile != nil {
		return b.flushProfiled(t, s)
	}
	if err := b.lanesOn(t); err != nil {
		return err
	}
	if b.graphs {
		key := b.rec.key()
		exec, seen := b.gc.lookup(key)
		if exec != 0 {
			b.stats.GraphLaunches++
			return t.LaunchGraph(exec, s)
		}
		if seen {
			g, err := b.capture(t, s)
			if err == nil {
				if old := b.gc.add(key, g); old != 0 {
					t.DestroyGraphExec(old)
				}
				b.stats.Captures++
				b.stats.GraphLaunches++
				return t.LaunchGraph(g, s)
			}
			// A capture that fails leaves the work to direct launches.
		}
	}
	for i := range b.rec.launches {
		r := &b.rec.launches[i]
		if err := b.replayRec(t, r, s); err != nil {
			return err
		}
		if r.op == opLaunch {
			b.stats.Launches++
		}
	}
	return nil
}

// Submit implements compute.Submitter: it flushes the recorded launches
// (one graph of them once seen twice) without waiting for them, unless
// noSubmit, or submitFirst and the last flush was Submit's.
func (b *Backend) Submit() {
	if b.noSubmit || len(b.rec.launches) == 0 || b.submitFirst && b.submitted {
		return
	}
	b.do(nil)
	b.submitted = true
}

// StartProfile makes later flushes time every kernel (direct launches, one
// event pair each); StopProfile returns what they measured.
func (b *Backend) StartProfile() { b.profile = &Profile{Kernels: map[string]*KernelTime{}} }

// StopProfile ends the profile (after the queued work) and returns it.
func (b *Backend) StopProfile() (*Profile, error) {
	err := b.Sync()
	p := b.profile
	b.profile = nil
	return p, err
}

func (b *Backend) flushProfiled(t *Thread, s Stream) error {
	// Every launch on the main stream, one after another (forks and joins
	// left out), so that each is timed alone.
	launches := b.prof[:0]
	for i := range b.rec.launches {
		if b.rec.launches[i].op == opLaunch {
			launches = append(launches, &b.rec.launches[i])
		}
	}
	b.prof = launches[:0]
	n := len(launches)
	for len(b.events) < n+1 {
		e, err := t.NewEvent(true)
		if err != nil {
			return err
		}
		b.events = append(b.events, e)
	}
	if err := t.Record(b.events[0], s); err != nil {
		return err
	}
	for i, r := range launches {
		if err := t.replay(r, s); err != nil {
			return err
		}
		if err := t.Record(b.events[i+1], s); err != nil {
			return err
		}
	}
	b.stats.Launches += int64(n)
	if err := t.Sync(s); err != nil {
		return err
	}
	for i, r := range launches {
		ms, err := t.Elapsed(b.events[i], b.events[i+1])
		if err != nil {
			return err
		}
		name := b.k.names[r.f]
		kt := b.profile.Kernels[name]
		if kt == nil {
			kt = &KernelTime{}
			b.profile.Kernels[name] = kt
		}
		kt.Launches++
		kt.Ms += ms
		b.profile.Order = append(b.profile.Order, LaunchTime{Name: name, Grid: r.grid, Ms: ms})
	}
	return nil
}

// capture records the recording's launches into an executable graph.
func (b *Backend) capture(t *Thread, s Stream) (GraphExec, error) {
	if err := t.BeginCapture(s); err != nil {
		return 0, err
	}
	var lerr error
	for i := range b.rec.launches {
		if lerr = b.replayRec(t, &b.rec.launches[i], s); lerr != nil {
			break
		}
	}
	g, err := t.EndCapture(s)
	if lerr != nil || err != nil {
		if g != 0 {
			t.DestroyGraph(g)
		}
		return 0, errors.Join(lerr, err)
	}
	defer t.DestroyGraph(g)
	return t.Instantiate(g)
}

// Close frees everything the backend allocated (and closes the device if
// NewBackend opened it).
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	err := b.dev.Do(b.ctx, func(t *Thread) error {
		var errs []error
		errs = append(errs, b.flushOn(t), t.Sync(t.Stream()))
		errs = append(errs, b.closeBranches(t)...) // after their work, before the memory it reads
		for _, g := range b.gc.graphs {
			errs = append(errs, t.DestroyGraphExec(g.exec))
		}
		b.gc.graphs = nil
		for buf := range b.allocs {
			errs = append(errs, t.Free(buf.p))
		}
		for _, h := range b.hostBufs {
			errs = append(errs, t.FreeHost(h))
		}
		b.hostBufs = nil
		for _, m := range b.mats {
			errs = append(errs, t.FreeMatrix(m))
		}
		for _, o := range b.overflow {
			errs = append(errs, t.Free(o.p))
		}
		if b.arena != nil {
			errs = append(errs, t.Free(b.arena.p))
		}
		for _, mt := range b.moeTabs {
			errs = append(errs, t.Free(mt.tab))
		}
		for _, c := range []Ptr{b.hcCnt, b.attcCnt, b.afdCnt, b.chainCtr} {
			if c != 0 {
				errs = append(errs, t.Free(c))
			}
		}
		for _, gt := range b.groupTabs {
			if gt.tab != 0 {
				errs = append(errs, t.Free(gt.tab))
			}
		}
		for _, e := range b.events {
			errs = append(errs, t.DestroyEvent(e))
		}
		return errors.Join(errs...)
	})
	b.closed = true
	if b.own {
		err = errors.Join(err, b.dev.Close())
	}
	return err
}

// ptr is the device address of t (0 for the zero Tensor).
func (b *Backend) ptr(t compute.Tensor) Ptr {
	if !t.Valid() {
		return 0
	}
	buf, ok := t.Buf.(*buffer)
	if !ok {
		panic(fmt.Sprintf("cuda: a %T tensor is not this backend's", t.Buf))
	}
	if t.Off < 0 || t.Off+t.Bytes() > buf.n {
		panic(fmt.Sprintf("cuda: tensor %v outside its buffer of %d bytes", t, buf.n))
	}
	return buf.p.Add(t.Off)
}

func sizeOf(dt compute.DType, rows, cols int) int64 {
	if dt.Size() == 0 {
		panic(fmt.Sprintf("cuda: no tensors of %v", dt))
	}
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("cuda: tensor of %d×%d", rows, cols))
	}
	return int64(rows) * int64(cols) * int64(dt.Size())
}

// residentSlots returns how many blocks of f (opThreads threads, no
// dynamic shared memory) the device's sms SMs hold at once; sms (one an
// SM, which any kernel that launches gets) where the driver cannot say,
// and 0 without f.
func residentSlots(t *Thread, f Func, sms int) int {
	if f == 0 {
		return 0
	}
	n, err := t.ResidentBlocks(f, opThreads, 0)
	if err != nil || n < 1 {
		n = 1
	}
	return n * sms
}

// Alloc implements compute.Memory.
func (b *Backend) Alloc(dt compute.DType, rows, cols int) (compute.Tensor, error) {
	n := sizeOf(dt, rows, cols)
	buf := &buffer{n: n}
	err := b.dev.Do(b.ctx, func(t *Thread) error {
		p, err := t.Alloc(max(n, 256))
		if err != nil {
			return err
		}
		buf.p = p
		return t.Memset8(p, 0, max(n, 256), t.Stream())
	})
	if err != nil {
		return compute.Tensor{}, fmt.Errorf("cuda: Alloc(%v, %d×%d): %w", dt, rows, cols, err)
	}
	b.allocs[buf] = struct{}{}
	return compute.Tensor{Buf: buf, DT: dt, Rows: rows, Cols: cols}, nil
}

// HostFloats implements compute.HostMemory: n float32s of page-locked
// host memory (cuMemAllocHost), which Read fills by DMA at the copy
// engine's rate instead of through the driver's staging buffer (run 18,
// H200: 505 KB in 24 us against 77 us; 129 MB in 2.4 ms against 9.9).
// It returns nil when the allocation fails or STRATA_CUDA_PAGEABLE=1.
func (b *Backend) HostFloats(n int) []float32 {
	if b.noHostMem || b.closed || n <= 0 {
		return nil
	}
	var h HostBuf
	err := b.dev.Do(b.ctx, func(t *Thread) error {
		var err error
		h, err = t.AllocHost(4 * n)
		return err
	})
	if err != nil {
		return nil
	}
	b.hostBufs = append(b.hostBufs, h)
	bs := h.Bytes()
	clear(bs)
	return unsafe.Slice((*float32)(unsafe.Pointer(&bs[0])), n)
}

// Free implements compute.Memory.
func (b *Backend) Free(t compute.Tensor) {
	buf, ok := t.Buf.(*buffer)
	if !ok {
		return
	}
	if _, mine := b.allocs[buf]; !mine {
		return
	}
	delete(b.allocs, buf)
	b.do(func(th *Thread) error {
		if err := th.Sync(th.Stream()); err != nil {
			return err
		}
		return th.Free(buf.p)
	})
}

// scratchAlign keeps every scratch tensor 256-byte aligned (16-byte loads,
// coalescing).
const scratchAlign = 256

// Scratch implements compute.Memory.
func (b *Backend) Scratch(dt compute.DType, rows, cols int) compute.Tensor {
	n := sizeOf(dt, rows, cols)
	at := b.off
	b.off += (n + scratchAlign - 1) / scratchAlign * scratchAlign
	b.peak = max(b.peak, b.off)
	if b.arena != nil && at+n <= b.arena.n {
		return compute.Tensor{Buf: b.arena, Off: at, DT: dt, Rows: rows, Cols: cols}
	}
	// Beyond the arena: memory of its own until the next full reset.
	buf := &buffer{n: n}
	err := b.dev.Do(b.ctx, func(t *Thread) error {
		p, err := t.Alloc(max(n, 256))
		buf.p = p
		return err
	})
	if err != nil {
		panic(fmt.Sprintf("cuda: scratch of %d bytes: %v", n, err))
	}
	b.overflow = append(b.overflow, buf)
	return compute.Tensor{Buf: buf, DT: dt, Rows: rows, Cols: cols}
}

// ScratchMark implements compute.Memory.
func (b *Backend) ScratchMark() int64 { return b.off }

// ResetScratch implements compute.Memory. A full reset after a step that
// outgrew the arena waits for the queued work and reallocates the arena.
func (b *Backend) ResetScratch(mark int64) {
	if mark > 0 {
		if !b.branchesOpen() { // else a lane's op may still read it (branch.go)
			b.off = min(b.off, mark)
		}
		return
	}
	if b.branchesOpen() {
		// What the lanes read is handed out again below: join them first.
		lane := int(b.rt.lane)
		b.Join(0)
		b.fork(lane)
	}
	if len(b.overflow) > 0 || (b.arena != nil && b.peak > b.arena.n) {
		want := b.peak + b.peak/4 + (1 << 20)
		b.do(func(t *Thread) error {
			if err := t.Sync(t.Stream()); err != nil {
				return err
			}
			for _, o := range b.overflow {
				t.Free(o.p)
			}
			b.overflow = b.overflow[:0]
			if b.arena.n < want {
				if err := t.Free(b.arena.p); err != nil {
					return err
				}
				b.arena = nil
				p, err := t.Alloc(want)
				if err != nil {
					return err
				}
				b.arena = &buffer{p: p, n: want}
			}
			return nil
		})
	}
	b.off, b.peak = 0, 0
}

// Upload implements compute.Memory: the matrix is copied to the device once,
// in its stored format.
func (b *Backend) Upload(w *compute.Matrix) error {
	_, err := b.mat(w)
	return err
}

// mat returns w's device copy, uploading it first if need be.
func (b *Backend) mat(w *compute.Matrix) (*Matrix, error) {
	if m, ok := w.Resident.(*Matrix); ok {
		return m, nil
	}
	var m *Matrix
	err := b.do(func(t *Thread) error {
		var err error
		if m, err = t.UploadMatrix(w, t.Stream()); err != nil {
			return err
		}
		return t.Sync(t.Stream())
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: uploading a %v matrix %d×%d: %w", w.DType, w.Rows, w.Cols, err)
	}
	b.mats = append(b.mats, m)
	w.Resident = m
	return m, nil
}

// mustMat is mat for ops, which cannot return errors: a failure sticks.
func (b *Backend) mustMat(w *compute.Matrix) *Matrix {
	m, err := b.mat(w)
	if err != nil {
		panic(err.Error())
	}
	return m
}

// Vector implements compute.Memory.
func (b *Backend) Vector(v []float32) (compute.Tensor, error) {
	t, err := b.Alloc(compute.F32, 1, len(v))
	if err != nil {
		return t, err
	}
	b.Write(t, v)
	return t, b.err
}

// hostBytes returns the bytes of a host slice for Write and Read.
func hostBytes(v any) ([]byte, int, bool) {
	switch s := v.(type) {
	case []float32:
		return Bytes(s), len(s), true
	case []int32:
		return Bytes(s), len(s), true
	case []byte:
		return s, len(s), true
	}
	return nil, 0, false
}

// checkHost checks that host data v of n elements (bytes for []byte) fits t.
func checkHost(op string, v any, n int, t compute.Tensor) {
	want := t.Len()
	switch v.(type) {
	case []byte:
		want = int(t.Bytes())
	case []float32:
		if t.DT != compute.F32 {
			panic(fmt.Sprintf("cuda: %s of []float32 with a %v tensor", op, t.DT))
		}
	case []int32:
		if t.DT != compute.I32 {
			panic(fmt.Sprintf("cuda: %s of []int32 with a %v tensor", op, t.DT))
		}
	}
	if n != want {
		panic(fmt.Sprintf("cuda: %s of %d elements with a tensor of %d", op, n, want))
	}
}

// Write implements compute.Memory.
func (b *Backend) Write(dst compute.Tensor, src any) {
	bs, n, ok := hostBytes(src)
	if !ok {
		panic(fmt.Sprintf("cuda: Write from %T", src))
	}
	checkHost("Write", src, n, dst)
	p := b.ptr(dst)
	b.do(func(t *Thread) error { return t.CopyToDevice(p, bs, t.Stream()) })
}

// Read implements compute.Memory.
func (b *Backend) Read(dst any, src compute.Tensor) error {
	bs, n, ok := hostBytes(dst)
	if !ok {
		return fmt.Errorf("cuda: Read into %T", dst)
	}
	checkHost("Read", dst, n, src)
	p := b.ptr(src)
	b.do(func(t *Thread) error {
		if err := t.CopyFromDevice(bs, p, t.Stream()); err != nil {
			return err
		}
		return t.Sync(t.Stream())
	})
	return b.err
}

// Copy implements compute.Memory.
func (b *Backend) Copy(dst, src compute.Tensor, regions []compute.Region) {
	d, s := b.ptr(dst), b.ptr(src)
	for _, r := range regions {
		if r.Dst < 0 || r.Src < 0 || r.Dst+r.Bytes > dst.Bytes() || r.Src+r.Bytes > src.Bytes() {
			panic(fmt.Sprintf("cuda: Copy of %d bytes from %d of %d to %d of %d", r.Bytes, r.Src, src.Bytes(), r.Dst, dst.Bytes()))
		}
	}
	b.do(func(t *Thread) error {
		for _, r := range regions {
			if err := t.Copy(d.Add(r.Dst), s.Add(r.Src), r.Bytes, t.Stream()); err != nil {
				return err
			}
		}
		return nil
	})
}

// Sync implements compute.Memory.
func (b *Backend) Sync() error {
	b.do(func(t *Thread) error { return t.Sync(t.Stream()) })
	return b.err
}

// Err returns the first error of the queued work seen so far.
func (b *Backend) Err() error { return b.err }
