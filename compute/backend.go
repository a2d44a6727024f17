package compute

import "fmt"

// Backend is a device: it owns memory and runs ops on it. Ops take their
// outputs first, as Tensors this backend allocated (Alloc or Scratch), and
// overwrite every element of them; they return once the work is queued (a
// GPU) or done (the CPU), and a later Read or Sync returns its result or
// error. A Backend's ops are called by one goroutine at a time; Read, Write
// and Copy may also be called from other goroutines for memory that no
// queued op reads or writes (a request's pages streamed out or in by a
// hand-off while the engine runs other requests).
//
// Every op is batch-invariant: a token's outputs are the same bits whatever
// else is in the batch and however the sequence's tokens were split into
// steps, so that batched, chunked, cached and speculative paths reproduce
// one-token decoding exactly.
type Backend interface {
	Memory
	Linear
	Mixing
	Attention
	Experts
}

// Recurrent, Causal and Gating are the ops of linear-attention hybrids
// (Qwen3.5's Gated DeltaNet with gated full attention). They are not part
// of Backend: a backend offers them if it can, and a model that needs them
// checks at load.

// Memory is a backend's allocator and the transfers between it and the host.
type Memory interface {
	// Name says which device this is ("cpu", "cuda:0 (NVIDIA H200)").
	Name() string
	// Alloc returns zeroed memory that lives until Free.
	Alloc(dt DType, rows, cols int) (Tensor, error)
	Free(t Tensor)
	// Scratch returns memory for a step's temporaries, which lives until a
	// ResetScratch to a mark taken before it. Its contents are undefined.
	Scratch(dt DType, rows, cols int) Tensor
	// ScratchMark is the scratch's current position; ResetScratch(mark)
	// frees what was taken after it, and ResetScratch(0) everything (a
	// backend may then resize its scratch to what the step needed).
	ScratchMark() int64
	ResetScratch(mark int64)
	// Upload makes w resident where the backend computes (a no-op on the
	// CPU, which reads w.Data in place).
	Upload(w *Matrix) error
	// Vector returns a tensor holding v (F32, one row), made at load time
	// for weights the ops read as tensors (norm weights, biases). The CPU
	// backend may share v's memory; v must not change afterwards.
	Vector(v []float32) (Tensor, error)
	// Write copies host data into dst: a []float32 for F32, []int32 for
	// I32, []byte for any dtype (raw bytes).
	Write(dst Tensor, src any)
	// Read copies src into host memory (dst as for Write), waiting for the
	// ops queued before it, and returns their error, if any.
	Read(dst any, src Tensor) error
	// Copy copies regions of bytes from src to dst (they may be the same
	// tensor; regions must not overlap).
	Copy(dst, src Tensor, regions []Region)
	// Sync waits for every queued op and returns the first error.
	Sync() error
}

// Region is a byte range copied by Memory.Copy.
type Region struct{ Dst, Src, Bytes int64 }

// Linear is the row-wise algebra of a forward pass.
type Linear interface {
	// MatMul computes y[t] = W · x[t] for every row t of x [T, W.Cols] into
	// y [T, W.Rows].
	MatMul(y, x Tensor, w *Matrix)
	// GroupedMatMul computes, for group g, y[t][g·R:(g+1)·R] = ws[g] ·
	// x[t][g·n:(g+1)·n], where every ws[g] is R×n: a block-diagonal
	// product (DeepSeek-V4's grouped output projection).
	GroupedMatMul(y, x Tensor, ws []*Matrix)
	// RMSNorm computes y[t] = w ⊙ x[t] / sqrt(mean(x[t]²) + eps) for every
	// row of x; w may be the zero Tensor (no weight). y may alias x.
	RMSNorm(y, x, w Tensor, eps float32)
	// RoPE rotates, in every row r of x, the interleaved pairs (2i, 2i+1)
	// of the last 2·invFreq.Len() channels by angle pos[r/heads]·invFreq[i]
	// (float32 product, as the reference), by its negative when inverse is
	// set. pos is I32 with one entry per heads rows.
	RoPE(x, pos Tensor, heads int, invFreq Tensor, inverse bool)
	// Embed writes, for every token t, row tokens[t] of table into each of
	// the copies consecutive D-wide parts of h[t] (h is [T, copies·D]).
	Embed(h Tensor, table *Matrix, tokens Tensor, copies int)
	// GatherRows writes dst[i] = src[rows[i]].
	GatherRows(dst, src, rows Tensor)
	// AddRepeated adds e[r/n] to every row r of h.
	AddRepeated(h, e Tensor, n int)
}

// Mixing is the hyper-connection (mHC) mixing of residual streams.
type Mixing interface {
	// HCPre computes a site's weights from the streams h [T, hc·D] and the
	// sub-block input x [T, D] = Σ_j pre_j·h_j, with post [T, hc] and comb
	// [T, hc·hc] (row j = input stream, column k = output stream, made
	// doubly stochastic by Sinkhorn) for HCPost.
	HCPre(x, post, comb, h Tensor, w *HC, p HCParams)
	// HCPost writes the site's output back: h'[k] = post[k]·y + Σ_j
	// comb[j][k]·h[j] for every token.
	HCPost(h, y, post, comb Tensor, p HCParams)
	// HCHead collapses the streams of every row of h into x [R, D] =
	// Σ_j pre_j·h_j with the head's weights (no Sinkhorn, no post).
	HCHead(x, h Tensor, w *HC, p HCParams)
}

// Attention is the state-reading part of attention layers.
type Attention interface {
	// Compress runs a compressor over the batch: it adds the positional
	// bias to the scores, emits the entry of every window that closes
	// inside a span into the entries (softmax-weighted sum of values, RMS
	// norm, RoPE at the window's first position), and keeps in the ring
	// the values and scores later windows still need.
	Compress(a *CompressArgs, sp Spans)
	// IndexerSelect scores every closed compressed entry for every token
	// and writes the TopK best (best first) into Sel, or all of them in
	// order when there are at most TopK; N gets how many.
	IndexerSelect(a *IndexerArgs, sp Spans)
	// SparseAttention computes every token's attention output over the
	// window (the ring's earlier positions and this step's KV) and the
	// compressed entries (Sel's, or all closed ones), each key also its
	// value, with a per-head sink logit in the softmax denominator.
	SparseAttention(a *AttentionArgs, sp Spans)
	// StoreRing writes the last Size positions of every span's rows of src
	// into ring slots p mod Size, in the ring's format.
	StoreRing(ring Paged, size int, src Tensor, sp Spans)
	// LoadRing writes into dst, for every token t, the ring slot of its
	// span at position pos[t] mod size (what StoreRing wrote there).
	LoadRing(dst Tensor, ring Paged, size int, sp Spans)
	// RoundTrip writes into dst the rows of src as a slot of format f
	// (width src.Cols, rope trailing channels) gives them back: what a
	// later step reads of what StoreRing writes now.
	RoundTrip(dst, src Tensor, f SlotFormat, rope int)
}

// Experts is the mixture-of-experts feed-forward.
type Experts interface {
	// MoE routes every token to K experts (by its id through Tid2Eid, or by
	// the best biased scores), runs each expert's SwiGLU once over the
	// tokens routed to it, and writes y = Σ_k weight_k·expert_k(x) +
	// shared(x) (times sigmoid(SharedGate·x) when SharedGate is set).
	MoE(y, x, tokens Tensor, a *MoEArgs)
}

// Spans describes a step's ragged batch to the ops that look at sequence
// boundaries.
type Spans struct {
	// Tab is I32 [N, 3]: for each span, the batch index of its first token,
	// its token count, and the position of its first token.
	Tab Tensor
	// Pos is I32 [T]: every token's position.
	Pos Tensor
}

// SlotFormat is how a cache slot stores a vector.
type SlotFormat int

const (
	SlotF32    SlotFormat = iota // float32 values
	SlotBF16                     // bf16 values (round to nearest even)
	SlotFP8KV                    // quant.EncodeFP8KV: e4m3 with a power-of-two scale per 64 channels, the last Rope channels bf16
	SlotFP8Key                   // quant.EncodeFP8Key: e4m3 with one float32 scale
	SlotFP8MLA                   // quant.EncodeFP8MLA: e4m3 with a power-of-two float32 scale per 128 channels, the last Rope channels bf16 (FlashMLA's 656-byte layout)
)

func (f SlotFormat) String() string {
	switch f {
	case SlotF32:
		return "f32"
	case SlotBF16:
		return "bf16"
	case SlotFP8KV:
		return "fp8-kv"
	case SlotFP8Key:
		return "fp8-key"
	case SlotFP8MLA:
		return "fp8-mla"
	}
	return fmt.Sprintf("SlotFormat(%d)", int(f))
}

// Paged names one cache kind's slots, in one layer, for every span of a
// batch: span s's slot k is at byte (k mod PerPage)·SlotBytes of page
// Pages[s][k / PerPage] of the pool.
type Paged struct {
	Pool      Tensor // U8 [pages, page bytes]
	Pages     Tensor // I32 [N, max pages of a span]
	PerPage   int
	SlotBytes int
	// Format is how a slot stores its Width values (Rope: the trailing
	// channels SlotFP8KV keeps in bf16).
	Format      SlotFormat
	Width, Rope int
}

// HC is the weights of one hyper-connection site: Fn [(2+hc)·hc, hc·D] (a
// head's: [hc, hc·D]), Base [(2+hc)·hc] (a head's: [hc]) and Scale [3] (a
// head's: [1]).
type HC struct {
	Fn          *Matrix
	Base, Scale Tensor
}

// HCParams are a model's hyper-connection constants.
type HCParams struct {
	HC, D         int
	NormEps, Eps  float32 // the RMS norm's eps; the weights' eps
	SinkhornIters int
}

// CompressArgs are one compressor's inputs.
type CompressArgs struct {
	A, Z        Tensor // F32 [T, c·Width]: wkv·x and wgate·x (c = 2 when overlapping); Z gets the bias added
	Ape         Tensor // F32 [Rate, c·Width]
	Norm        Tensor // F32 [Width]
	Width, Rate int
	// Overlap: the first half (Ca) of a token feeds the next window's
	// entry, the second half (Cb) its own (CSA).
	Overlap bool
	Entries Paged  // one entry per window (its first Width values)
	Ring    Paged  // Rate slots (2·Rate when overlapping) of [a, z]
	InvFreq Tensor // F32: the entries' RoPE
	Eps     float32
}

// IndexerArgs are a lightning indexer's inputs.
type IndexerArgs struct {
	Q                      Tensor // F32 [T, Heads·Dim], rotated
	W                      Tensor // F32 [T, Heads]: the head weights, scaled by 1/sqrt(Heads) (a backend may do it in place: W's values after the call are unspecified)
	Keys                   Paged  // one key per Rate tokens
	Heads, Dim, Rate, TopK int
	Sel                    Tensor // I32 [T, TopK]
	N                      Tensor // I32 [T]
}

// AttentionArgs are a sparse attention's inputs.
type AttentionArgs struct {
	Out        Tensor // F32 [T, Heads·Dim]
	Q          Tensor // F32 [T, Heads·Dim]
	KV         Tensor // F32 [T, Dim]: this step's vectors, not yet in the ring
	Window     Paged  // ring of WindowSize slots
	WindowSize int
	// Compressed entries, one per Rate tokens (zero Pool: none). With Sel
	// and N (IndexerSelect's), each token reads its selected entries;
	// without, every entry closed at or before it.
	Compressed Paged
	Rate       int
	Sel, N     Tensor
	Sink       Tensor // F32 [Heads]
	Heads, Dim int
	Scale      float32
	// OutRoPE, when valid (F32 [nf]), turns each head's output back at its
	// token's position: Out is then exactly what RoPE(Out as [T·Heads,
	// Dim], sp.Pos, Heads, OutRoPE, true) makes of the attention's output
	// (one op where a backend fuses the two).
	OutRoPE Tensor
}

// Scoring is a router's scoring function.
type Scoring int

const (
	SqrtSoftplus Scoring = iota // sqrt(softplus(logit)) per expert
	Sigmoid                     // sigmoid(logit) per expert
	Softmax                     // softmax over the experts' logits
)

// SwiGLU is one expert: W1 (gate) and W3 (up) are [I, D], W2 (down) [D, I].
type SwiGLU struct{ W1, W2, W3 *Matrix }

// MoEArgs are one MoE layer's weights and constants.
type MoEArgs struct {
	Gate    *Matrix // [E, D] router
	Bias    Tensor  // F32 [E] selection bias (learned routing)
	Tid2Eid Tensor  // I32 [V, K] token id -> experts (hash routing); zero: learned
	Experts []SwiGLU
	Shared  SwiGLU
	K       int
	Scoring Scoring
	// RoutedScale multiplies the normalized routing weights; Limit clamps
	// the SwiGLU's gate from above and its up projection to ±Limit.
	RoutedScale, Limit float32
	// SharedGate, when set ([1, D]), scales the shared expert's output by
	// sigmoid(SharedGate·x), one scalar per token (Qwen3.5-MoE).
	SharedGate *Matrix
	// SharedUnclamped exempts the shared expert from Limit (HY4 clamps
	// its routed experts only).
	SharedUnclamped bool
}

// MultiMatMul is optionally implemented by a backend that can run several
// products of the same input in one pass: MatMuls computes ys[i] = ws[i]·x
// for every i, exactly as MatMul(ys[i], x, ws[i]) would (the same bits).
// A model calls it only when its backend has it.
type MultiMatMul interface {
	MatMuls(ys []Tensor, x Tensor, ws []*Matrix)
}

// ChainedLinear is optionally implemented by a backend that can run a
// grouped product and the product of its output as one operation:
// GroupedMatMulThen computes exactly GroupedMatMul(u, x, ws) followed by
// MatMul(y, u, w), the same bits (u is written too). A model calls it
// only when its backend has it.
type ChainedLinear interface {
	GroupedMatMulThen(y, u, x Tensor, ws []*Matrix, w *Matrix)
}

// NormedRoPE is optionally implemented by a backend that can turn rows as
// it normalizes them: RMSNormRoPE computes exactly RMSNorm(x, x, w, eps)
// followed by RoPE(x, pos, heads, invFreq, false), the same bits. A model
// calls it only when its backend has it.
type NormedRoPE interface {
	RMSNormRoPE(x, w Tensor, eps float32, pos Tensor, heads int, invFreq Tensor)
}

// FusedMixing is optionally implemented by a backend that can write one
// mHC site's output back and start the next site in one pass:
// HCPostPreNorm computes exactly HCPost(h, y, postIn, combIn, p) (left
// out when y is not Valid: the first site), then HCPre(x, post, comb, h,
// w, p) and RMSNorm(x, x, norm, eps), the same bits. A model calls it only
// when its backend has it.
type FusedMixing interface {
	HCPostPreNorm(h, y, postIn, combIn, x, post, comb Tensor, w *HC, p HCParams, norm Tensor, eps float32)
}

// HostMemory is optionally implemented by a backend whose Read is faster
// into host memory of its own (a GPU's page-locked memory, which its copy
// engine writes directly, where a Go slice is staged through a driver
// buffer: run 18 on the H200 read a batch-1 step's 505 KB of logits in
// 77 us into Go memory, 24 us into page-locked). HostFloats returns n
// float32s of such memory, zeroed, or nil when the backend has none to
// give. The memory stays valid until the backend's Close.
type HostMemory interface {
	HostFloats(n int) []float32
}

// Branches is optionally implemented by a backend that can run independent
// ops at once (a GPU's streams). Branch(i), 1 ≤ i ≤ MaxBranches, queues the
// ops that follow on branch i until the next Branch or Join: they start
// after every op queued on the main branch before the call, and may run
// while the ops of the main branch and of the other branches queued after
// it run. Branch(0) returns to the main branch. Join(i) returns to it too,
// and the ops queued on it after the call start after branch i's ops
// (every branch's for Join(0)).
//
// Ops on different branches between two Joins must not write what another
// of them reads or writes. The values are those of queuing every op on the
// main branch: only the schedule changes. A model calls it only when its
// backend has it, and Joins before ResetScratch and at the end of a step.
type Branches interface {
	Branch(i int)
	Join(i int)
}

// Submitter is optionally implemented by a backend that queues ops and
// runs them later (a GPU's recorded launches): Submit starts the ops
// queued so far without waiting for them, so that they run while the
// caller queues the next ones. A model calls it between stretches of a
// step (after a layer, every branch joined); the values do not change.
type Submitter interface {
	Submit()
}

// MaxBranches is the most side branches a Branches backend offers.
const MaxBranches = 4

// Prefetcher is optionally implemented by a backend with a cache between
// its memory and its compute (a GPU's L2): Prefetch starts loading ws, in
// order, into that cache (the first bytes of them in all when bytes > 0;
// a backend may load less where its cache is smaller), for the products
// that read them soon. It reads and changes no value; a model queues it on
// a branch (Branches) while other ops leave the memory idle.
type Prefetcher interface {
	Prefetch(ws []*Matrix, bytes int64)
}
