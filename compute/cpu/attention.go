package cpu

import (
	"math"
	"unsafe"

	"github.com/strata-inference/strata/compute"
)

// IndexerSelect implements compute.Attention (DeepSeek-V4's lightning
// indexer): entry e's score for a token is Σ_h c_h·relu(q_h·k_e), with
// c_h = w_h·(1/sqrt(dim)) and w scaled by 1/sqrt(heads) in place; the
// token keeps its TopK best entries (all of them, in order, when it has at
// most TopK).
//
// The scores' arithmetic (batch-invariant: an entry's score depends on its
// key and the token's query alone): each q_h·k_e is one chain over the
// dimensions in order (fused multiply-adds in the vector families, rounded
// products in the portable one); the heads, padded with zero heads to a
// multiple of 16, are summed as 16 lanes (lane l takes heads l, l+16, ...
// in order) reduced by sumLanesGo's tree. Tokens' entries are scored in
// chunks on all workers, then each token's TopK runs on one.
func (b *Backend) IndexerSelect(a *compute.IndexerArgs, sp compute.Spans) {
	nI, dI, K := a.Heads, a.Dim, a.TopK
	T := a.Q.Rows
	checkShape("IndexerSelect Q", a.Q, T, nI*dI)
	checkShape("IndexerSelect W", a.W, T, nI)
	checkShape("IndexerSelect Sel", a.Sel, T, K)
	s := b.s
	qI, wt, sel, cnt, pos := F32(a.Q), F32(a.W), I32(a.Sel), I32(a.N), I32(sp.Pos)
	wscale := float32(1 / math.Sqrt(float64(nI)))
	for i := range wt {
		wt[i] *= wscale
	}
	j := &s.idx
	*j = idxJob{
		k: s.k, q: qI, w: wt, sel: sel, keys: a.Keys,
		heads: nI, dim: dI, hp: roundUp(nI, 16), topK: K,
		sscale: float32(1 / math.Sqrt(float64(dI))), gen: s.nextGen(),
	}
	toks := s.idxToks[:0]
	for si, sn := range s.spanList(sp) {
		for i := range sn.n {
			t := sn.start + i
			n := (int(pos[t]) + 1) / a.Rate
			if n <= K {
				out := sel[t*K : (t+1)*K]
				for i := range n {
					out[i] = int32(i)
				}
				for i := n; i < K; i++ {
					out[i] = -1
				}
				cnt[t] = int32(n)
				continue
			}
			toks = append(toks, idxTok{t: t, span: si, n: n})
			cnt[t] = int32(K)
		}
	}
	s.idxToks = toks
	// Score the tokens in rounds whose scores fit in idxScoreBudget.
	for lo := 0; lo < len(toks); {
		hi, total := lo, 0
		for hi < len(toks) && (hi == lo || total+toks[hi].n <= idxScoreBudget) {
			total += toks[hi].n
			hi++
		}
		j.round(s, toks[lo:hi], total)
		lo = hi
	}
	*j = idxJob{}
}

// idxScoreBudget bounds the scores one round of IndexerSelect holds.
const idxScoreBudget = 1 << 22

// idxChunk is the number of entries a worker scores per item.
const idxChunk = 256

// idxTok is a token whose entries IndexerSelect scores.
type idxTok struct {
	t, span, n int
	off        int // its scores' offset in the round's buffer
	first      int // its first item in the round
}

// idxJob is one IndexerSelect call: per round, phase 0 scores chunks of
// entries, phase 1 selects each token's TopK.
type idxJob struct {
	k                    *kernelSet
	q, w                 []float32
	sel                  []int32
	keys                 compute.Paged
	heads, dim, hp, topK int
	sscale               float32
	gen                  int64
	toks                 []idxTok
	scores               []float32
	phase, items         int
}

// round scores and selects the tokens toks, whose entries number total.
func (j *idxJob) round(s *state, toks []idxTok, total int) {
	s.idxScores = growSlack(s.idxScores, total)
	off, items := 0, 0
	for i := range toks {
		toks[i].off, toks[i].first = off, items
		off += toks[i].n
		items += (toks[i].n + idxChunk - 1) / idxChunk
	}
	j.toks, j.scores = toks, s.idxScores
	const minWork = 1 << 16 // multiply-adds per worker worth a wake-up
	j.phase, j.items = 0, items
	s.parallel(j, min(items, max(1, total*j.heads*j.dim/minWork)))
	j.phase, j.items = 1, len(toks)
	s.parallel(j, min(len(toks), max(1, total/minWork)))
	j.toks, j.scores = nil, nil
}

func (j *idxJob) run(s *state, worker int) {
	ws := &s.ws[worker]
	for {
		it, ok := s.claim(j.items)
		if !ok {
			return
		}
		if j.phase == 1 {
			tk := &j.toks[it]
			topK(j.sel[tk.t*j.topK:(tk.t+1)*j.topK], j.scores[tk.off:tk.off+tk.n], j.topK)
			continue
		}
		// The token of item it: the last whose first item is at most it.
		lo, hi := 0, len(j.toks)
		for hi-lo > 1 {
			if m := (lo + hi) / 2; j.toks[m].first <= it {
				lo = m
			} else {
				hi = m
			}
		}
		j.score(ws, &j.toks[lo], it-j.toks[lo].first)
	}
}

// score computes chunk c of token tk's entries' scores.
func (j *idxJob) score(ws *workspace, tk *idxTok, c int) {
	w := &ws.idx
	if w.gen != j.gen || w.t != tk.t {
		j.prepare(w, tk.t)
	}
	keys := spanSlots(j.keys, tk.span)
	e0, e1 := c*idxChunk, min(tk.n, (c+1)*idxChunk)
	out := j.scores[tk.off+e0 : tk.off+e1]
	f32 := keys.format == compute.SlotF32
	if !f32 {
		w.kbuf = grow(w.kbuf, 4*j.dim)
	}
	blocks := j.hp / 16
	for e := e0; e < e1; e += 4 {
		var kp [4]unsafe.Pointer
		for i := range kp {
			ei := min(e+i, e1-1) // a short group repeats its last entry
			if f32 {
				kp[i] = unsafe.Pointer(&keys.slot(ei)[0])
			} else {
				kp[i] = unsafe.Pointer(&keys.read(ei, j.dim, w.kbuf[i*j.dim:(i+1)*j.dim])[0])
			}
		}
		var acc [4]lanes
		j.k.idxDots(&acc, &kp, w.qt, j.hp, w.c, j.dim, blocks, &w.d)
		for i := range min(4, e1-e) {
			out[e-e0+i] = sumLanesGo(&acc[i])
		}
	}
}

// prepare lays out token t's queries for idxDots in w: transposed,
// qt[k·hp+h] = q_h[k], and the head weights c_h = w_h·sscale, both zero for
// the padding heads.
func (j *idxJob) prepare(w *idxWork, t int) {
	nI, dI, hp := j.heads, j.dim, j.hp
	w.qt = grow(w.qt, dI*hp)
	w.c = grow(w.c, hp)
	clear(w.qt)
	clear(w.c)
	q := j.q[t*nI*dI : (t+1)*nI*dI]
	for h := range nI {
		for k, v := range q[h*dI : (h+1)*dI] {
			w.qt[k*hp+h] = v
		}
		w.c[h] = j.w[t*nI+h] * j.sscale
	}
	w.gen, w.t = j.gen, t
}

// idxWork is a worker's indexer scratch: the queries of token t of call
// gen, laid out by prepare.
type idxWork struct {
	gen   int64
	t     int
	qt, c []float32
	kbuf  []float32 // decoded keys of formats other than f32
	d     lanes     // portable scratch
}

// SparseAttention implements compute.Attention: each token attends, head
// by head, to its window (this step's vectors and the ring) and to its
// compressed entries (those the indexer selected, or all), each key used
// as key and value, with a per-head sink logit in the softmax denominator.
//
// Keys are read in place (decoded into per-worker scratch for formats
// other than f32). A token's logits are the family's F32 one-token
// products (as MatMul computes them) times the scale; the softmax is in
// float32 with float64 exponentials; each output element sums its keys in
// key order (see accKeys). Work items are (token, block of heads), so the
// heads of a decoding token are spread over the workers; no value depends
// on the split.
func (b *Backend) SparseAttention(a *compute.AttentionArgs, sp compute.Spans) {
	H, d := a.Heads, a.Dim
	T := a.Q.Rows
	checkShape("SparseAttention Q", a.Q, T, H*d)
	checkShape("SparseAttention KV", a.KV, T, d)
	checkShape("SparseAttention Out", a.Out, T, H*d)
	if T == 0 || H == 0 {
		return
	}
	s := b.s
	j := &s.att
	*j = attnJob{
		k: s.k, a: a, q: F32(a.Q), kv: F32(a.KV), o: F32(a.Out), pos: I32(sp.Pos), sink: F32(a.Sink),
		hasComp: a.Compressed.Pool.Valid(), spans: s.spanList(sp), gen: s.nextGen(), keyMat: keyMatrix(d),
	}
	if a.Sel.Valid() {
		j.sel, j.cnt = I32(a.Sel), I32(a.N)
	}
	s.tokSpan = growInts(s.tokSpan, T)
	j.tokSpan = s.tokSpan
	keys := 0
	for si, sn := range j.spans {
		for i := range sn.n {
			t := sn.start + i
			j.tokSpan[t] = int32(si)
			keys += j.keyCount(t)
		}
	}
	// Blocks of heads: enough items for every worker to take two while a
	// batch is small, whole tokens otherwise.
	splits := min(H, max(1, (2*s.threads+T-1)/T))
	j.hb = (H + splits - 1) / splits
	j.splits = (H + j.hb - 1) / j.hb
	j.items = T * j.splits
	const minWork = 1 << 16 // multiply-adds per worker worth a wake-up
	s.parallel(j, min(j.items, max(1, 2*keys*H*d/minWork)))
	*j = attnJob{}
	if a.OutRoPE.Valid() {
		b.RoPE(a.Out.Reshape(T*H, d), sp.Pos, H, a.OutRoPE, true)
	}
}

// attnJob is one SparseAttention call.
type attnJob struct {
	k             *kernelSet
	a             *compute.AttentionArgs
	q, kv, o      []float32
	sink          []float32
	pos, sel, cnt []int32
	hasComp       bool
	spans         []span
	tokSpan       []int32 // each token's span
	gen           int64
	keyMat        compute.Matrix
	hb, splits    int // heads per item, items per token
	items         int
}

// keyCount is the number of keys token t attends to.
func (j *attnJob) keyCount(t int) int {
	p := int(j.pos[t])
	n := p - max(0, p-j.a.WindowSize+1) + 1
	if j.hasComp {
		if j.sel != nil {
			n += int(j.cnt[t])
		} else {
			n += (p + 1) / j.a.Rate
		}
	}
	return n
}

func (j *attnJob) run(s *state, worker int) {
	ws := &s.ws[worker]
	for {
		it, ok := s.claim(j.items)
		if !ok {
			return
		}
		t, blk := it/j.splits, it%j.splits
		w := &ws.att
		if w.gen != j.gen || w.t != t {
			j.gather(w, t)
		}
		j.attend(ws, t, blk*j.hb, min(j.a.Heads, (blk+1)*j.hb))
	}
}

// attnWork is a worker's attention scratch: the keys of token t of call
// gen.
type attnWork struct {
	gen    int64
	t      int
	keys   []unsafe.Pointer // each key's d float32s
	arena  []float32        // decoded keys of formats other than f32
	logits []float32
	q      []float32 // queries padded to whole vectors, when d is not
}

// gather lists token t's keys in w: the window in position order, then
// the compressed entries (the selected ones in the indexer's order, or all
// in order).
func (j *attnJob) gather(w *attnWork, t int) {
	a, d := j.a, j.a.Dim
	si := int(j.tokSpan[t])
	sn := j.spans[si]
	p, p0 := int(j.pos[t]), sn.pos0
	lo := max(0, p-a.WindowSize+1)
	n := j.keyCount(t)
	if cap(w.keys) < n {
		w.keys = make([]unsafe.Pointer, 0, max(n, 2*cap(w.keys)))
	}
	w.keys = w.keys[:0]
	ring := spanSlots(a.Window, si)
	var ent slots
	if j.hasComp {
		ent = spanSlots(a.Compressed, si)
	}
	// Size the arena first: pointers into it must stay valid.
	dec := 0
	if ring.format != compute.SlotF32 {
		dec += max(0, min(p, p0-1)-lo+1)
	}
	if j.hasComp && ent.format != compute.SlotF32 {
		dec += n - (p - lo + 1)
	}
	w.arena = growSlack(w.arena, dec*d)
	used := 0
	slot := func(sl slots, k int) unsafe.Pointer {
		if sl.format == compute.SlotF32 {
			return unsafe.Pointer(&sl.slot(k)[0])
		}
		v := sl.read(k, d, w.arena[used*d:(used+1)*d])
		used++
		return unsafe.Pointer(&v[0])
	}
	for k := lo; k <= p; k++ {
		if k >= p0 {
			r := sn.start + k - p0
			w.keys = append(w.keys, unsafe.Pointer(&j.kv[r*d]))
		} else {
			w.keys = append(w.keys, slot(ring, k%a.WindowSize))
		}
	}
	if j.hasComp {
		if j.sel != nil {
			K := a.Sel.Cols
			for _, e := range j.sel[t*K : t*K+int(j.cnt[t])] {
				w.keys = append(w.keys, slot(ent, int(e)))
			}
		} else {
			for e := range (p + 1) / a.Rate {
				w.keys = append(w.keys, slot(ent, e))
			}
		}
	}
	w.gen, w.t = j.gen, t
}

// attend computes heads [h0, h1) of token t's output from the keys in
// ws.att.
func (j *attnJob) attend(ws *workspace, t, h0, h1 int) {
	w := &ws.att
	H, d := j.a.Heads, j.a.Dim
	keys := w.keys
	n, nh := len(keys), h1-h0
	w.logits = growSlack(w.logits, nh*n)
	L := w.logits
	// The queries, zero-padded to whole vectors for the kernels.
	dp := roundUp(d, 16)
	Q := j.q[(t*H+h0)*d : (t*H+h1)*d]
	if dp != d {
		w.q = grow(w.q, nh*dp)
		for h := range nh {
			copy(w.q[h*dp:h*dp+d], Q[h*d:(h+1)*d])
			clear(w.q[h*dp+d : (h+1)*dp])
		}
		Q = w.q
	}
	scale := j.a.Scale
	var r row4
	for s0 := 0; s0 < n; s0 += 4 {
		var p [4]unsafe.Pointer
		for i := range p {
			p[i] = keys[min(s0+i, n-1)] // a short group repeats its last key
		}
		keyRows(&r, &p, d)
		m := min(4, n-s0)
		for h := range nh {
			out := j.k.dot4(ws, &r, &j.keyMat, Q[h*dp:h*dp+dp])
			row := L[h*n+s0 : h*n+s0+m]
			for i := range row {
				row[i] = out[i] * scale
			}
		}
	}
	for h := range nh {
		lh := L[h*n : (h+1)*n]
		sk := j.sink[h0+h]
		mx := sk
		for _, v := range lh {
			mx = max(mx, v)
		}
		den := float32(math.Exp(float64(sk - mx)))
		for i, v := range lh {
			e := float32(math.Exp(float64(v - mx)))
			lh[i] = e
			den += e
		}
		for i := range lh {
			lh[i] /= den
		}
	}
	O := j.o[(t*H+h0)*d : (t*H+h1)*d]
	clear(O)
	for s0 := 0; s0 < n; s0 += 4 {
		m := min(4, n-s0)
		for h := range nh {
			j.k.accKeys(O[h*d:(h+1)*d], L[h*n+s0:h*n+s0+m], keys[s0:s0+m])
		}
	}
}

// nextGen returns a new call id, which tells workers' cached per-call
// state from a previous call's.
func (s *state) nextGen() int64 {
	s.gen++
	return s.gen
}

// growSlack is grow for buffers whose need creeps up call after call (with
// the context): it reallocates with a quarter to spare.
func growSlack(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n, n+n/4+64)
	}
	return s[:n]
}

// growInts returns s resliced to length n, reallocated only if too small.
func growInts(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n, max(n, 2*cap(s)))
	}
	return s[:n]
}
