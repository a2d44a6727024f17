package cuda

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// The Attention ops of Backend. The kernels find each token's span in the
// span table on the device and size their loops by what they read there,
// so that grids depend on shapes only (what a graph replay needs); where
// a grid needs a bound, the page tables' capacity gives it.

// paged packs p as the kernels' Paged struct (slots.cuh): pool, pages,
// pageBytes, then stride, perPage, slotBytes, fmt, width, rope as int32s.
func (b *Backend) paged(p compute.Paged) []uint64 {
	if !p.Pool.Valid() {
		return make([]uint64, 6)
	}
	two := func(lo, hi int) uint64 { return uint64(uint32(int32(lo))) | uint64(uint32(int32(hi)))<<32 }
	return []uint64{
		uint64(b.ptr(p.Pool)), uint64(b.ptr(p.Pages)), uint64(p.Pool.Cols),
		two(p.Pages.Cols, p.PerPage), two(p.SlotBytes, int(p.Format)), two(p.Width, p.Rope),
	}
}

// capacity is the most slots a span of p can address.
func capacity(p compute.Paged) int { return p.Pages.Cols * p.PerPage }

// spanArgs appends the span table and its row count.
func (b *Backend) spanArgs(a *Args, sp compute.Spans) *Args {
	return a.Ptr(b.ptr(sp.Tab)).Int(sp.Tab.Rows)
}

// Compress implements compute.Attention.
func (b *Backend) Compress(a *compute.CompressArgs, sp compute.Spans) {
	width, rate := a.Width, a.Rate
	cw, ringSlots := width, rate
	overlap := 0
	if a.Overlap {
		cw, ringSlots, overlap = 2*width, 2*rate, 1
	}
	T := a.A.Rows
	checkShape("Compress A", a.A, T, cw)
	checkShape("Compress Z", a.Z, T, cw)
	if T == 0 {
		return
	}
	if 4*width > b.optin {
		panic(fmt.Sprintf("cuda: Compress of width %d", width))
	}
	pos := b.ptr(sp.Pos)
	b.launch("compress_bias", Dim3{X: T, Y: blocks(cw, opThreads)}, Dim3{X: opThreads}, 0,
		b.args().Ptr(b.ptr(a.Z)).Ptr(b.ptr(a.Ape)).Ptr(pos).Int(cw).Int(rate))
	ar := b.args().Ptr(b.ptr(a.A)).Ptr(b.ptr(a.Z))
	b.spanArgs(ar, sp).Ptr(pos).Struct(b.paged(a.Ring)...).Struct(b.paged(a.Entries)...).
		Ptr(b.ptr(a.Norm)).Ptr(b.ptr(a.InvFreq)).Int(a.InvFreq.Len()).Int(width).Int(rate).Int(overlap).F32(a.Eps)
	b.launch("compress_emit", Dim3{X: T}, Dim3{X: opThreads}, 4*width, ar)
	ar = b.args().Ptr(b.ptr(a.A)).Ptr(b.ptr(a.Z))
	b.spanArgs(ar, sp).Ptr(pos).Struct(b.paged(a.Ring)...).Int(cw).Int(ringSlots)
	b.launch("compress_ring", Dim3{X: T}, Dim3{X: opThreads}, 0, ar)
}

// indexerWarps is IDX_WARPS; a warp scores indexerPerWarp(T, entries) entries.
const indexerWarps = 8

// indexerPerWarp is 2 entries a warp for batches of fewer than 16 tokens
// (decode: more blocks; run 3 had 8, 16 blocks at a 4K context) and 8
// from 16 (prefill: each block loads its token's queries once for 64
// entries), or where a token has more than indexerLongEntries entries
// (every block stages the token's queries: at 64K context and 2 a warp a
// token is a thousand blocks). Run 25 on an H100, 8 a warp against 2:
// -0.9% / -3.3% a step at batches 1 / 8 at 64K and +1.9% / +0.3% at 4K
// with indexer_scores_r25 (call 2), -7.5% / -7.4% at 64K with
// indexer_scores (call 3). No score depends on it.
func indexerPerWarp(T, entries int) int {
	if T < 16 && entries <= indexerLongEntries {
		return 2
	}
	return 8
}

// indexerLongEntries is between run 25's two contexts (1.5K and 16.6K
// entries at 4K and 64K tokens).
const indexerLongEntries = 4096

// IndexerSelect implements compute.Attention: scores for every entry a span
// can hold (-Inf past the token's closed ones), the TopK kernel over them,
// then the tokens with at most TopK entries take all of theirs (indexer_fix,
// or with topkFix the top-k kernel itself).
func (b *Backend) IndexerSelect(a *compute.IndexerArgs, sp compute.Spans) {
	nI, dI, K := a.Heads, a.Dim, a.TopK
	T := a.Q.Rows
	checkShape("IndexerSelect Q", a.Q, T, nI*dI)
	checkShape("IndexerSelect W", a.W, T, nI)
	checkShape("IndexerSelect Sel", a.Sel, T, K)
	if T == 0 {
		return
	}
	pos := b.ptr(sp.Pos)
	if maxE := capacity(a.Keys); maxE > K {
		if K > MaxTopK {
			panic(fmt.Sprintf("cuda: IndexerSelect of top %d (at most %d)", K, MaxTopK))
		}
		mark := b.ScratchMark()
		defer b.ResetScratch(mark)
		scores := b.Scratch(compute.F32, T, maxE)
		b.indexerScores(scores, a, sp)
		reg := !b.topkR26 && topkRegPays(maxE)
		if b.topkFix {
			b.fail(b.k.topKSel(b.rt, 0, b.ptr(a.Sel), b.ptr(scores), T, maxE, K, reg, b.ptr(a.N), pos, a.Rate))
			return
		}
		b.fail(b.k.topK(b.rt, 0, b.ptr(a.Sel), b.ptr(scores), T, maxE, K, reg))
	}
	b.launch("indexer_fix", Dim3{X: T}, Dim3{X: opThreads}, 0,
		b.args().Ptr(b.ptr(a.Sel)).Ptr(b.ptr(a.N)).Ptr(pos).Int(a.Rate).Int(K))
}

// indexerScores writes scores [T, capacity(a.Keys)]: each entry's index
// score for the tokens with more than a.TopK closed entries (-Inf past
// their closed ones), the CPU's values bit for bit. indexer_scores, or
// run 21's indexer_scores_r21 (the same bits: A/B indexer-r21) where the
// shapes do not suit it; indexer_scores_r25 (the same bits: A/B
// indexer-r25) where its warps' keys do not fit in shared memory.
func (b *Backend) indexerScores(scores compute.Tensor, a *compute.IndexerArgs, sp compute.Spans) {
	nI, dI, K := a.Heads, a.Dim, a.TopK
	T, maxE := a.Q.Rows, capacity(a.Keys)
	checkShape("IndexerSelect scores", scores, T, maxE)
	ipw := indexerPerWarp(T, maxE)
	if b.indexerIPW > 0 {
		ipw = b.indexerIPW
	}
	name, qs := "indexer_scores", dI+4
	shared := 4 * (nI*qs + nI + indexerWarps*ipw*(dI+nI))
	if b.indexerR25 || shared > b.optin || b.k.fns[name] == 0 {
		name, shared = "indexer_scores_r25", 4*(nI*qs+nI+indexerWarps*(dI+nI))
	}
	if b.indexerR21 || dI > 128 || dI%4 != 0 || nI%4 != 0 || ipw > 8 || b.k.fns[name] == 0 {
		name, qs = "indexer_scores_r21", dI+1
		shared = 4 * (nI*qs + nI + indexerWarps*(dI+nI))
	}
	if shared > b.optin {
		panic(fmt.Sprintf("cuda: IndexerSelect of %d heads of %d needs %d bytes of shared memory", nI, dI, shared))
	}
	// The kernels scale the head weights as they read them (the bits of
	// the CPU's scaling in place; run 12 launched scale_f32 for it).
	wscale := float32(1 / math.Sqrt(float64(nI)))
	ar := b.args().Ptr(b.ptr(scores)).Ptr(b.ptr(a.Q)).Ptr(b.ptr(a.W))
	b.spanArgs(ar, sp).Ptr(b.ptr(sp.Pos)).Struct(b.paged(a.Keys)...).Int(nI).Int(dI).Int(a.Rate).Int(maxE).Int(K).
		F32(float32(1 / math.Sqrt(float64(dI)))).Int(ipw).F32(wscale)
	b.launch(name, Dim3{X: T, Y: blocks(maxE, indexerWarps*ipw)}, Dim3{X: opThreads}, shared, ar)
}

// Attention split over the keys (attn_* in model.cu): ATT_KC keys a
// chunk, attnHeads heads a block, or attnHeadsMany (the _h16 entries)
// where a batch has at least attnManyBlocks blocks of them: those decode
// each chunk's keys once for 16 heads instead of 4 (the same bits).
const (
	attnChunk = 32
	// attnLogitChunk is the logits' chunk of a tiny launch (run 11's ncu:
	// 64 blocks of 32 keys a window-only layer at batch 1 took 16.9 us, a
	// block's chain of loads and products at 8 warps an SM; 256 blocks of
	// 8 keys take 10.9).
	attnLogitChunk = 8
	// attnGroup is ATT_G, the channels a key load decodes.
	attnGroup = 8
	// attnTinyBlocks: launches of at most this many blocks (tokens × head
	// groups) take the logits' short chunks and attn_values' half heads.
	// Run 11: a batch-1 step (16 blocks) 1.3% faster with each, batches 8
	// and 16 (128, 256) 1.1-2.2% slower.
	attnTinyBlocks = 32
	attnHeads      = 4
	attnHeadsMany  = 16
	attnManyBlocks = 128
	// attnSplitBlocks: a launch of fewer blocks than this (tokens × head
	// groups) splits each token's chunks over blocks and combines them;
	// more loop over the chunks in one block. Either way gives the same
	// bits.
	attnSplitBlocks = 264
	// attnScratch bounds the logits and partial sums of one launch; a
	// larger batch runs in slices of tokens (the same bits again).
	attnScratch = 128 << 20
)

// SparseAttention implements compute.Attention: the logits of every key
// chunk, then the values (split over blocks at small T, flash-decoding,
// with a combine), in token slices that bound the scratch.
func (b *Backend) SparseAttention(a *compute.AttentionArgs, sp compute.Spans) {
	H, d := a.Heads, a.Dim
	T := a.Q.Rows
	checkShape("SparseAttention Q", a.Q, T, H*d)
	checkShape("SparseAttention KV", a.KV, T, d)
	checkShape("SparseAttention Out", a.Out, T, H*d)
	if T == 0 {
		return
	}
	hasComp, selK := 0, 0
	maxKeys := a.WindowSize
	if a.Compressed.Pool.Valid() {
		hasComp = 1
		if a.Sel.Valid() {
			selK = a.Sel.Cols
			maxKeys += selK
		} else {
			maxKeys += capacity(a.Compressed)
		}
	}
	if b.attnFDTakes(T, H, d, maxKeys) {
		b.attentionFD(a, sp, hasComp, selK, maxKeys)
		return
	}
	if b.attnTCTakes(T, H, d, maxKeys) {
		b.attentionTC(a, sp, hasComp, selK, maxKeys)
		return
	}
	if b.attnTiled(d) {
		b.attentionTiled(a, sp, hasComp, selK, maxKeys)
		return
	}
	hg, suffix := attnHeads, ""
	if !b.attnHG4 && (b.attnHG16 || T*blocks(H, attnHeadsMany) >= attnManyBlocks) && 4*(attnChunk+attnHeadsMany)*d+12*attnChunk <= b.optin {
		hg, suffix = attnHeadsMany, "_h16"
	}
	shared := 4*(attnChunk+hg)*d + 12*attnChunk
	if shared > b.optin || d > 4*opThreads {
		panic(fmt.Sprintf("cuda: SparseAttention of heads of %d needs %d bytes of shared memory", d, shared))
	}
	HGs := blocks(H, hg)
	split := T*HGs < attnSplitBlocks && !b.attnNoSplit
	// The logits' chunks: short ones where the launch is smallest (the
	// same logits, more blocks), and below attn_values' blocks half a
	// head's channels each.
	tiny := T*HGs <= attnTinyBlocks
	kc := attnChunk
	if tiny && !b.attnLogits32 {
		kc = attnLogitChunk
	}
	ds := 1
	if split && tiny && d%(2*attnGroup) == 0 && !b.attnValuesWhole {
		ds = 2 // each block half of the channels
	}
	b.attentionLaunches(a, sp, hasComp, selK, maxKeys, split, ds, attnLaunch{
		logits: "attn_logits" + suffix, ly: HGs, lz: blocks(maxKeys, kc), lthreads: opThreads, lshared: 4*(kc+hg)*d + 12*kc,
		values: "attn_values" + suffix, vy: HGs * ds,
		largs: func(ar *Args) { ar.Int(kc) },
	})
}

// attnLaunch names one way of launching attention's logits and values
// kernels (their arguments are attn_logits' and attn_values', largs
// adding the logits' last ones).
type attnLaunch struct {
	logits           string
	ly, lz, lthreads int
	lshared          int
	values           string
	vy               int
	largs            func(*Args)
}

// attentionLaunches queues the logits, values and (split) combine
// launches of SparseAttention in token slices that bound the scratch.
func (b *Backend) attentionLaunches(a *compute.AttentionArgs, sp compute.Spans, hasComp, selK, maxKeys int, split bool, ds int, l attnLaunch) {
	H, d, T := a.Heads, a.Dim, a.Q.Rows
	S := blocks(maxKeys, attnChunk)
	perTok := int64(4 * H * maxKeys)
	if split {
		perTok += int64(4*H*S*d + 4*H*S + 4*H)
	}
	Tn := int(max(1, min(int64(T), attnScratch/perTok)))
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	lg := b.Scratch(compute.F32, Tn, H*maxKeys)
	var po, pl, pm compute.Tensor
	if split {
		po, pl, pm = b.Scratch(compute.F32, Tn*H*S, d), b.Scratch(compute.F32, Tn*H, S), b.Scratch(compute.F32, Tn, H)
	}
	win, comp := b.paged(a.Window), b.paged(a.Compressed)
	pos, sel, cnt, sink := b.ptr(sp.Pos), b.ptr(a.Sel), b.ptr(a.N), b.ptr(a.Sink)
	rate := max(a.Rate, 1)
	vec := 1
	if b.attnScalar {
		vec = 0
	}
	// attn_combine turns the output back (OutRoPE) as it writes it; without
	// it, rope_heads does after the last slice.
	nf := a.OutRoPE.Len()
	if 2*nf > d {
		panic(fmt.Sprintf("cuda: SparseAttention turns %d channels of heads of %d", 2*nf, d))
	}
	combineTurns := split && nf <= opThreads && !b.attnRoPEApart
	for t0 := 0; t0 < T; t0 += Tn {
		n := min(Tn, T-t0)
		ar := b.args().Ptr(b.ptr(lg)).Int(t0).Ptr(b.ptr(a.Q)).Ptr(b.ptr(a.KV))
		b.spanArgs(ar, sp).Ptr(pos).Struct(win...).Int(a.WindowSize).Struct(comp...).Int(hasComp).Int(rate).
			Ptr(sel).Ptr(cnt).Int(selK).Int(H).Int(d).F32(a.Scale).Int(maxKeys).Int(vec)
		l.largs(ar)
		b.launch(l.logits, Dim3{X: n, Y: l.ly, Z: l.lz}, Dim3{X: l.lthreads}, l.lshared, ar)
		z, sp1 := 1, 0
		if split {
			z, sp1 = S, 1
		}
		ar = b.args().Ptr(b.ptr(a.Out)).Ptr(b.ptr(po)).Ptr(b.ptr(pl)).Ptr(b.ptr(pm)).Int(sp1).Ptr(b.ptr(lg)).Int(t0).Ptr(b.ptr(a.KV))
		b.spanArgs(ar, sp).Ptr(pos).Struct(win...).Int(a.WindowSize).Struct(comp...).Int(hasComp).Int(rate).
			Ptr(sel).Ptr(cnt).Int(selK).Ptr(sink).Int(H).Int(d).Int(maxKeys).Int(vec).Int(ds)
		b.launch(l.values, Dim3{X: n, Y: l.vy, Z: z}, Dim3{X: opThreads}, 4*attnChunk*(d/ds)+12*attnChunk, ar)
		if split {
			ar = b.args().Ptr(b.ptr(a.Out)).Ptr(b.ptr(po)).Ptr(b.ptr(pl)).Ptr(b.ptr(pm)).Int(S).Int(t0)
			b.spanArgs(ar, sp).Ptr(pos).Int(a.WindowSize).Int(hasComp).Int(rate).Ptr(sel).Ptr(cnt).Ptr(sink).
				Int(H).Int(d).Int(maxKeys)
			if combineTurns {
				b.attnTurnLaunches++
				ar.Ptr(b.ptr(a.OutRoPE)).Int(nf)
			} else {
				ar.Ptr(0).Int(0)
			}
			r21 := 0
			if b.attnCombineR21 {
				r21 = 1
			}
			b.launch("attn_combine", Dim3{X: n, Y: H}, Dim3{X: opThreads}, 0, ar.Int(r21))
		}
	}
	if nf > 0 && !combineTurns {
		b.RoPE(a.Out.Reshape(T*H, d), sp.Pos, H, a.OutRoPE, true)
	}
}

// Attention on the tensor cores (attn_tc in attn.cu): Fast mode's
// attention of up to attnTCMaxT tokens in one launch, a block 16 heads of
// attcChunk keys of one token, its operands split as bfloat16 hi + lo
// (to ~2^-17), the chunks added by each token's last block.
const (
	// attnTCMinT: run 27 (H100, two calls) measured a batch-1 step 7.0-9.4%
	// slower with attn_tc (its one launch ~50 us: 8-40 blocks, each
	// loading, multiplying and adding in turn, a third of its cycles
	// waiting on the instruction cache) and a batch-8 step 0.6-2.1%
	// faster; Backend.attnTCMinT starts at it.
	attnTCMinT = 2
	attnTCMaxT = 8
	attcChunk  = 64
	// attcCounters: attn_tc's counters, one a (token, 16 heads).
	attcCounters = 1024
)

// attcShared is attn_tc's dynamic shared memory for heads of d channels:
// the queries' and keys' bfloat16 pairs (rows of d + 8 halves), the
// probabilities' pairs, the logits, each head's maximum and sum, and the
// keys' pointers and kinds.
func attcShared(d int) int {
	return 2*2*(16+attcChunk)*(d+8) + 2*2*16*(attcChunk+8) + 4*16*attcChunk + 4*32 + 12*attcChunk
}

// attnTCTakes reports whether SparseAttention of T tokens, H heads of d
// channels and up to maxKeys keys a token takes attn_tc.
func (b *Backend) attnTCTakes(T, H, d, maxKeys int) bool {
	S := blocks(maxKeys, attcChunk)
	return b.mode == Fast && !b.attnTCOff && b.k.tensorCores && b.k.fns["attn_tc"] != 0 &&
		T >= b.attnTCMinT && T <= attnTCMaxT && d%32 == 0 && d <= 512 && S <= attcChunk && attcShared(d) <= b.optin &&
		T*blocks(H, 16) <= attcCounters && int64(4*T*H*S*(d+2)) <= attnScratch
}

// attentionTC is SparseAttention on attn_tc.
func (b *Backend) attentionTC(a *compute.AttentionArgs, sp compute.Spans, hasComp, selK, maxKeys int) {
	H, d, T := a.Heads, a.Dim, a.Q.Rows
	ctr := b.counters(&b.attcCnt, attcCounters, "attn_tc")
	if ctr == 0 {
		return
	}
	S := blocks(maxKeys, attcChunk)
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	b.attnTCLaunches++
	b.launch("attn_tc", Dim3{X: T, Y: blocks(H, 16), Z: S}, Dim3{X: 256}, attcShared(d), b.chunkedArgs(a, sp, hasComp, selK, maxKeys, S, ctr))
}

// chunkedArgs are attn_tc's and attn_fd's arguments, S chunks a token:
// the attention's, then their chunks' sums (scratch: the caller resets
// it after the launch), counters ctr and OutRoPE.
func (b *Backend) chunkedArgs(a *compute.AttentionArgs, sp compute.Spans, hasComp, selK, maxKeys, S int, ctr Ptr) *Args {
	H, d, T := a.Heads, a.Dim, a.Q.Rows
	po, pml := b.Scratch(compute.F32, T*H*S, d), b.Scratch(compute.F32, T*H*S, 2)
	win, comp := b.paged(a.Window), b.paged(a.Compressed)
	ar := b.args().Ptr(b.ptr(a.Out)).Ptr(b.ptr(a.Q)).Ptr(b.ptr(a.KV))
	return b.spanArgs(ar, sp).Ptr(b.ptr(sp.Pos)).Struct(win...).Int(a.WindowSize).Struct(comp...).Int(hasComp).Int(max(a.Rate, 1)).
		Ptr(b.ptr(a.Sel)).Ptr(b.ptr(a.N)).Int(selK).Ptr(b.ptr(a.Sink)).Int(H).Int(d).F32(a.Scale).Int(maxKeys).
		Ptr(b.ptr(po)).Ptr(b.ptr(pml)).Ptr(ctr).Ptr(b.ptr(a.OutRoPE)).Int(a.OutRoPE.Len())
}

// Attention on the CUDA cores in one launch (attn_fd in attn.cu): Fast
// mode's attention of up to Backend.attnFDMaxT tokens, a block afdHeads
// (4) heads of afdChunk keys of one token in float32, each chunk against its
// own maximum, the chunks added by the token's last block. For one token:
// attn_tc's blocks (16 heads of 64 keys, 8-40 of them at batch 1) each ran
// a long chain alone, and the split kernels are three launches on the
// layer's critical path.
const (
	afdChunk = 32 // AFD_KC
	afdHeads = 4  // heads a block by default (attn_fd; attn_fd_h2 and _h8 beside)
	afdSMax  = 64 // AFD_SMAX: chunks a token
	// afdCounters: attn_fd's counters, one a (token, head group).
	afdCounters = 4096
	// afdStatic: what the opt-in leaves attn_fd's static arrays (5.2 KB
	// with 8 heads).
	afdStatic = 8 << 10
)

// afdEntry is attn_fd's entry for hg heads a block (Backend.afdHeads: 4,
// the default, 2 or 8).
func afdEntry(hg int) string {
	switch hg {
	case 2:
		return "attn_fd_h2"
	case 8:
		return "attn_fd_h8"
	}
	return "attn_fd"
}

// afdShared is attn_fd's dynamic shared memory for hg heads of d channels
// a block: the chunk's keys and the block's queries in float32, and the
// keys' pointers and kinds.
func afdShared(d, hg int) int { return 4*(afdChunk+hg)*d + 12*afdChunk }

// attnFDTakes reports whether SparseAttention of T tokens, H heads of d
// channels and up to maxKeys keys a token takes attn_fd.
func (b *Backend) attnFDTakes(T, H, d, maxKeys int) bool {
	S, hg := blocks(maxKeys, afdChunk), b.afdHeads
	return b.mode == Fast && T <= b.attnFDMaxT && b.k.fns[afdEntry(hg)] != 0 &&
		d%8 == 0 && d <= 2*opThreads && S <= afdSMax && afdShared(d, hg)+afdStatic <= b.optin &&
		T*blocks(H, hg) <= afdCounters && int64(4*T*H*S*(d+2)) <= attnScratch
}

// attentionFD is SparseAttention on attn_fd.
func (b *Backend) attentionFD(a *compute.AttentionArgs, sp compute.Spans, hasComp, selK, maxKeys int) {
	H, d, T := a.Heads, a.Dim, a.Q.Rows
	ctr := b.counters(&b.afdCnt, afdCounters, "attn_fd")
	if ctr == 0 {
		return
	}
	S := blocks(maxKeys, afdChunk)
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	b.attnFDLaunches++
	hg := b.afdHeads
	b.launch(afdEntry(hg), Dim3{X: T, Y: blocks(H, hg), Z: S}, Dim3{X: opThreads}, afdShared(d, hg),
		b.chunkedArgs(a, sp, hasComp, selK, maxKeys, S, ctr))
}

// Tiled attention (attn_qk and attn_pv in attn.cu): the logits of kb keys
// for 8 or 16 heads a block (tiles of 4 keys × 8 heads a warp), the values
// of 16 heads a block (TH heads × 4 channels a thread); the same bits as
// attn_logits and attn_values.
const (
	attnQKHeads = 16
	attnPVHeads = 16 // PV_HB
	// attnTiledTiny: launches of at most this many attn_pv blocks (tokens
	// × head groups: batches of 1 and 2) take the logits in chunks of
	// attnLogitChunk keys and give each attn_pv block half of a head's
	// channels, as attnTinyBlocks does for the 4-head kernels.
	attnTiledTiny = 8
)

// attnTiled reports whether attention of heads of d channels takes the
// tiled kernels: attn_pv's threads cover 16 heads of up to 512 channels
// (4 a thread).
func (b *Backend) attnTiled(d int) bool {
	return !b.attnTiledOff && d%4 == 0 && d <= 4*opThreads*8/attnPVHeads &&
		4*(attnChunk+attnQKHeads)*d+12*attnChunk <= b.optin && 4*attnChunk*d+12*attnChunk <= b.optin
}

// attentionTiled is SparseAttention on attn_qk and attn_pv.
func (b *Backend) attentionTiled(a *compute.AttentionArgs, sp compute.Spans, hasComp, selK, maxKeys int) {
	H, d, T := a.Heads, a.Dim, a.Q.Rows
	b.attnTiledCalls++
	hb := attnQKHeads
	if H <= 8 {
		hb = 8
	}
	HGv := blocks(H, attnPVHeads)
	split := T*HGv < attnSplitBlocks && !b.attnNoSplit
	tiny := T*HGv <= attnTiledTiny
	if b.attnTinyT > 0 {
		tiny = T <= b.attnTinyT
	}
	kb := attnChunk
	if tiny && !b.attnLogits32 {
		kb = attnLogitChunk
	} else if !tiny && b.attnQKKB > 0 {
		kb = b.attnQKKB
	}
	ds := 1
	if split && tiny && d%(2*attnGroup) == 0 && !b.attnValuesWhole {
		ds = 2
		if b.attnTinyDS == 4 && d%(4*attnGroup) == 0 {
			ds = 4
		}
	}
	// A thread takes TH heads of 4 channels: 8 where a block's channels
	// are more than 256 (the 256 threads cover 2 groups of 8 heads), else 4.
	values := "attn_pv4"
	if d/ds > 4*opThreads*4/attnPVHeads {
		values = "attn_pv8"
	}
	if tiny && b.attnQKHB8 {
		hb = 8
	}
	// Launches past the tiny layout take 8 keys a warp's tile (attn_qk8).
	logits, tk := "attn_qk", 4
	if !tiny && kb%8 == 0 && !b.attnQK4 && b.k.fns["attn_qk8"] != 0 {
		logits, tk = "attn_qk8", 8
	}
	tiles := (kb / tk) * (hb / 8)
	// opThreads a block at every launch, the warps past the tiles loading
	// queries and keys only: one warp a tile (run 20's, attnQKTiles) made
	// a step 0.8-0.9% slower at batch 1 and 1.2% at 2 (run 21 calls 4-5).
	lthreads := opThreads
	if b.attnQKTiles {
		lthreads = min(opThreads, 32*tiles)
	}
	b.attentionLaunches(a, sp, hasComp, selK, maxKeys, split, ds, attnLaunch{
		logits: logits, ly: blocks(H, hb), lz: blocks(maxKeys, kb), lthreads: lthreads, lshared: 4*(kb+hb)*d + 12*kb,
		values: values, vy: HGv * ds,
		largs: func(ar *Args) { ar.Int(kb).Int(hb) },
	})
}

// StoreRing implements compute.Attention.
func (b *Backend) StoreRing(ring compute.Paged, size int, src compute.Tensor, sp compute.Spans) {
	if src.Rows == 0 {
		return
	}
	ar := b.args().Struct(b.paged(ring)...).Int(size).Ptr(b.ptr(src)).Int(src.Cols)
	b.launch("store_ring", Dim3{X: src.Rows}, Dim3{X: opThreads}, 0, b.spanArgs(ar, sp))
}

// LoadRing implements compute.Attention.
func (b *Backend) LoadRing(dst compute.Tensor, ring compute.Paged, size int, sp compute.Spans) {
	if dst.Rows == 0 {
		return
	}
	ar := b.args().Ptr(b.ptr(dst)).Int(dst.Cols).Struct(b.paged(ring)...).Int(size)
	b.launch("load_ring", Dim3{X: dst.Rows}, Dim3{X: opThreads}, 0, b.spanArgs(ar, sp).Ptr(b.ptr(sp.Pos)))
}

// slotBytes is the size of a width-wide vector in format f.
func slotBytes(width, rope int, f compute.SlotFormat) int {
	switch f {
	case compute.SlotBF16:
		return 2 * width
	case compute.SlotFP8KV:
		return quant.FP8KVBytes(width, rope)
	case compute.SlotFP8Key:
		return quant.FP8KeyBytes(width)
	}
	return 4 * width
}

// RoundTrip implements compute.Attention.
func (b *Backend) RoundTrip(dst, src compute.Tensor, f compute.SlotFormat, rope int) {
	checkShape("RoundTrip dst", dst, src.Rows, src.Cols)
	if src.Rows == 0 {
		return
	}
	if f == compute.SlotF32 {
		b.copyCols(b.ptr(dst), src.Cols, b.ptr(src), src.Cols, src.Rows, src.Cols)
		return
	}
	shared := (slotBytes(src.Cols, rope, f) + 15) / 16 * 16
	b.launch("round_trip", Dim3{X: src.Rows}, Dim3{X: opThreads}, shared,
		b.args().Ptr(b.ptr(dst)).Ptr(b.ptr(src)).Int(src.Cols).Int(int(f)).Int(rope))
}
