package minimaxm3

import (
	"context"
	"fmt"
	"math"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
)

// slotWidth is how many values a slot of spec i holds.
func (m *Model) slotWidth(i int) int {
	if i == specKV {
		return 2 * m.Cfg.KVHeads * m.Cfg.HeadDim
	}
	return m.Cfg.IndexDim
}

// Forward runs one step over a ragged batch: every span continues its
// sequence at position Seq.Len(), every matmul runs once over all tokens,
// and each sequence's caches are appended to. It returns the logits the
// spans ask for, LogitRows(b) rows of VocabSize, in span order, and
// advances each sequence by its span's length.
//
// Every op is batch-invariant and reads what it attends to back from the
// cache, so a token's logits are the same bits however its sequence was
// split into steps and whatever shares its batch.
//
// Forward reserves the pages the spans need first and fails without
// touching any cache when the pool is short. If ctx is cancelled mid-step
// the caches hold stale slots past each sequence's Len, which later feeds
// overwrite before anything reads them.
func (m *Model) Forward(ctx context.Context, b *model.Batch) ([]float32, error) {
	if err := m.validate(b); err != nil {
		return nil, err
	}
	for i, s := range b.Spans {
		if err := s.Seq.Reserve(s.Seq.Len() + s.Len); err != nil {
			return nil, fmt.Errorf("minimaxm3: span %d: %w", i, err)
		}
	}
	be, cfg := m.be, m.Cfg
	be.ResetScratch(0)
	st, err := m.newStep(b)
	if err != nil {
		return nil, err
	}
	h := be.Scratch(compute.F32, st.T, cfg.Hidden)
	be.Embed(h, m.w.embed, st.tokens, 1)
	base := be.ScratchMark()
	for l := range m.w.layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m.layer(l, h, st)
		be.ResetScratch(base)
	}
	logits, err := m.head(h, st)
	if err != nil {
		return nil, err
	}
	for _, s := range b.Spans {
		s.Seq.Advance(s.Len)
	}
	return logits, nil
}

// layer runs decoder layer l on the residual stream h [T, D] in place
// (spec §2): h += Attn(RMSNorm_input(h)); h += FFN(RMSNorm_post(h)).
func (m *Model) layer(l int, h compute.Tensor, st *step) {
	be, cfg := m.be, m.Cfg
	L := &m.w.layers[l]
	T, D := st.T, cfg.Hidden
	eps := float32(cfg.RMSEps)
	x := be.Scratch(compute.F32, T, D)
	be.RMSNorm(x, h, L.inputNorm, eps)
	be.AddRepeated(h, m.attention(l, L, x, st), 1)
	be.RMSNorm(x, h, L.postNorm, eps)
	y := be.Scratch(compute.F32, T, D)
	alpha := float32(cfg.SwigluAlpha)
	if L.dense != nil {
		m.msa.SwiGLUOAI(y, x, L.dense, alpha, float32(cfg.SwigluLimit))
	} else {
		m.msa.MoEOAI(y, x, L.moe, alpha)
	}
	be.AddRepeated(h, y, 1)
}

// attention is layer l's attention on x [T, D] (spec §3, §4):
//
//	q = RoPE(RMSNorm_q(q_proj x)),  k = RoPE(RMSNorm_k(k_proj x)),  v = v_proj x
//	o = softmax(q·kᵀ·d^(-1/2) + mask) v  (GQA);  out = o_proj o
//
// with RoPE rotate-half on the first R channels of each head. Full layers
// mask causally; sparse layers also by the blocks the lightning indexer
// chose (BlockSelect), one choice per indexer head, shared by its query
// heads.
func (m *Model) attention(l int, L *rLayer, x compute.Tensor, st *step) compute.Tensor {
	be, cfg := m.be, m.Cfg
	T, Hq, Hkv, d := st.T, cfg.Heads, cfg.KVHeads, cfg.HeadDim
	eps := float32(cfg.RMSEps)
	pos := st.spans.Pos

	q := be.Scratch(compute.F32, T, Hq*d)
	be.MatMul(q, x, L.q)
	k := be.Scratch(compute.F32, T, Hkv*d)
	be.MatMul(k, x, L.k)
	v := be.Scratch(compute.F32, T, Hkv*d)
	be.MatMul(v, x, L.v)
	qh, kh := q.Reshape(T*Hq, d), k.Reshape(T*Hkv, d)
	be.RMSNorm(qh, qh, L.qNorm, eps)
	be.RMSNorm(kh, kh, L.kNorm, eps)
	m.causal.RoPEHalf(qh, pos, Hq, m.w.invFreq)
	m.causal.RoPEHalf(kh, pos, Hkv, m.w.invFreq)

	o := be.Scratch(compute.F32, T, Hq*d)
	args := compute.CausalArgs{
		Out: o, Q: q, K: k, V: v, KV: st.paged[specKV][l],
		Heads: Hq, KVHeads: Hkv, Dim: d, Scale: float32(1 / math.Sqrt(float64(d))),
	}
	if !cfg.Sparse[l] {
		m.causal.CausalAttention(&args, st.spans)
	} else {
		Hi, di, K := cfg.IndexHeads, cfg.IndexDim, cfg.IndexTopK
		qi := be.Scratch(compute.F32, T, Hi*di)
		be.MatMul(qi, x, L.iq)
		qih := qi.Reshape(T*Hi, di)
		be.RMSNorm(qih, qih, L.iqNorm, eps)
		m.causal.RoPEHalf(qih, pos, Hi, m.w.invFreq)
		ki := be.Scratch(compute.F32, T, di)
		be.MatMul(ki, x, L.ik)
		be.RMSNorm(ki, ki, L.ikNorm, eps)
		m.causal.RoPEHalf(ki, pos, 1, m.w.invFreq)
		sel := be.Scratch(compute.I32, T, Hi*K)
		cnt := be.Scratch(compute.I32, T, Hi)
		m.msa.BlockSelect(&compute.BlockSelectArgs{
			Q: qi, K: ki, Keys: st.paged[specIndexer][m.layout.keys[l]], Heads: Hi, Dim: di,
			Block: cfg.IndexBlock, TopK: K, Local: cfg.IndexLocal, Sel: sel, N: cnt,
		}, st.spans)
		m.msa.BlockSparseAttention(&compute.BlockSparseArgs{CausalArgs: args, Sel: sel, N: cnt, SelHeads: Hi, TopK: K, Block: cfg.IndexBlock}, st.spans)
	}
	y := be.Scratch(compute.F32, T, cfg.Hidden)
	be.MatMul(y, o, L.o)
	return y
}

// head computes the logits of the rows the spans ask for: the final norm
// and lm_head.
func (m *Model) head(h compute.Tensor, st *step) ([]float32, error) {
	be, cfg := m.be, m.Cfg
	if st.R == 0 {
		return nil, be.Sync()
	}
	x := be.Scratch(compute.F32, st.R, cfg.Hidden)
	be.GatherRows(x, h, st.rows)
	be.RMSNorm(x, x, m.w.norm, float32(cfg.RMSEps))
	out := be.Scratch(compute.F32, st.R, cfg.VocabSize)
	be.MatMul(out, x, m.w.output)
	logits := make([]float32, st.R*cfg.VocabSize)
	if err := be.Read(logits, out); err != nil {
		return nil, err
	}
	return logits, nil
}

// validate checks the batch before anything is computed or cached.
func (m *Model) validate(b *model.Batch) error {
	if len(b.Spans) == 0 {
		return fmt.Errorf("minimaxm3: a batch with no spans")
	}
	covered := 0
	seen := map[*cache.Seq]bool{}
	for i, s := range b.Spans {
		switch {
		case s.Seq == nil:
			return fmt.Errorf("minimaxm3: span %d has no sequence", i)
		case s.Draft != nil:
			return fmt.Errorf("minimaxm3: span %d carries a draft state, but MiniMax-M3 has no draft head here", i)
		case seen[s.Seq]:
			return fmt.Errorf("minimaxm3: span %d: sequence appears twice in one batch", i)
		case s.Len <= 0 || s.Start != covered || s.Start+s.Len > len(b.Tokens):
			return fmt.Errorf("minimaxm3: span %d covers tokens [%d,%d) of %d; spans must tile the batch in order", i, s.Start, s.Start+s.Len, len(b.Tokens))
		case s.Seq.Len()+s.Len > m.Cfg.MaxPosition:
			return fmt.Errorf("minimaxm3: span %d reaches position %d, beyond the model's %d", i, s.Seq.Len()+s.Len, m.Cfg.MaxPosition)
		}
		seen[s.Seq] = true
		covered += s.Len
	}
	if covered != len(b.Tokens) {
		return fmt.Errorf("minimaxm3: spans cover %d of %d tokens", covered, len(b.Tokens))
	}
	for i, t := range b.Tokens {
		if t < 0 || int(t) >= m.Cfg.VocabSize {
			return fmt.Errorf("minimaxm3: token %d at batch index %d is outside the vocabulary of %d", t, i, m.Cfg.VocabSize)
		}
	}
	return nil
}
