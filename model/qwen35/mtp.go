package qwen35

import (
	"context"
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
)

var _ model.Drafter = (*Model)(nil)

// Qwen3.5's multi-token prediction (mtp.* of the Hub checkpoint), as
// vLLM's Qwen3_5MultiTokenPredictor computes it: to draft the token after
// t+1 from position t, the embedding of token t+1 and the main model's
// final hidden state at t (after its final norm) are each normed,
// concatenated [embedding | hidden] and projected by fc to D; that runs
// through one full-attention decoder layer (with the main model's FFN
// kind, its own keys and values, RoPE at position t) and the MTP norm; the
// logits come from the main model's output head. The normed output stands
// in for the main model's hidden state at t+1 when drafting further.
//
// No reference computes this module here: it is checked against its own
// token-by-token path (catch-up passes over many positions and one-token
// passes give the same bits) and by greedy decoding with MTP speculation
// equalling plain decoding.

// DraftSpecs implements model.Drafter: the MTP layers' keys and values and
// the ring of hidden states they read (none without an MTP module).
func (m *Model) DraftSpecs() []cache.Spec {
	if m.mtpLayout == nil {
		return nil
	}
	return m.mtpLayout.specs
}

// DraftWindow implements model.Drafter. The MTP layer attends to every
// earlier position, but a catch-up pass covers at most the last
// DraftWindow positions (the hidden ring's): positions skipped (after a
// prefix hit, a preemption, or a gap longer than the window) keep stale
// MTP keys. That costs draft quality only; verification keeps the output
// exact.
func (m *Model) DraftWindow() int { return DraftWindow }

// Draft implements model.Drafter with the first MTP layer: for position t
// of a span (the draft state's Len onwards), the batch token is the token
// at t+1 and the hidden state is the one recorded for t.
func (m *Model) Draft(ctx context.Context, b *model.Batch) ([]float32, error) {
	if m.w.mtp == nil {
		return nil, fmt.Errorf("qwen35: the checkpoint has no MTP layer")
	}
	if err := m.validate(b); err != nil {
		return nil, err
	}
	for i, s := range b.Spans {
		if s.Draft != nil {
			return nil, fmt.Errorf("qwen35: MTP span %d carries a draft state of its own", i)
		}
		if err := s.Seq.Reserve(s.Seq.Len() + s.Len); err != nil {
			return nil, fmt.Errorf("qwen35: MTP span %d: %w", i, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, be := m.Cfg, m.be
	T, D, N := len(b.Tokens), cfg.Hidden, len(b.Spans)
	// Extra metadata: the rows that interleave embeddings and hidden
	// states into [T, 2D], then where each span's output is recorded (its
	// last row, at the position after it).
	extra := make([]int32, 0, 2*T+3*N)
	for t := range T {
		extra = append(extra, int32(t), int32(T+t))
	}
	for _, s := range b.Spans {
		extra = append(extra, int32(s.Start+s.Len-1), 1, int32(s.Seq.Len()+s.Len))
	}
	be.ResetScratch(0)
	st, ex, err := m.newStep(b, m.mtpLayout, nil, extra)
	if err != nil {
		return nil, err
	}
	w := m.w.mtp
	eps := float32(cfg.RMSEps)
	hidden := st.kind(m.mtpLayout.hidden)
	src := be.Scratch(compute.F32, 2*T, D)
	emb, hid := src.Slice(0, T), src.Slice(T, 2*T)
	be.Embed(emb, m.w.embed, st.tokens, 1)
	be.RMSNorm(emb, emb, w.normEmbed, eps)
	be.LoadRing(hid, hidden, HiddenRing, st.spans)
	be.RMSNorm(hid, hid, w.normHidden, eps)
	cat := be.Scratch(compute.F32, 2*T, D)
	be.GatherRows(cat, src, ex.Elems(0, 2*T))
	x := be.Scratch(compute.F32, T, D)
	be.MatMul(x, cat.Reshape(T, 2*D), w.fc)
	base := be.ScratchMark()
	m.layer(&w.layers[0], m.mtpLayout.layers[len(cfg.Layers)], x, st)
	be.ResetScratch(base)
	last := compute.Spans{Tab: ex.Elems(2*T, 2*T+3*N).Reshape(N, 3), Pos: st.spans.Pos}
	logits, err := m.head(x, w.norm, st, func(h compute.Tensor) { be.StoreRing(hidden, HiddenRing, h, last) })
	if err != nil {
		return nil, err
	}
	for _, s := range b.Spans {
		s.Seq.Advance(s.Len)
	}
	return logits, nil
}
