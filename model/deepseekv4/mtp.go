package deepseekv4

import (
	"context"
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
)

// NewMTPSeq takes the window rings of the MTP layers for one sequence from pool.
func (m *Model) NewMTPSeq(pool *cache.Pool) (*cache.Seq, error) {
	if len(m.Cfg.MTP) == 0 {
		return nil, fmt.Errorf("deepseekv4: the checkpoint has no MTP layer")
	}
	return cache.NewSeq(pool, m.mtpLayout.specs)
}

// MTPCacheSpecs are the cache kinds NewMTPSeq takes (float32).
func (m *Model) MTPCacheSpecs() []cache.Spec { return m.mtpLayout.specs }

// MTPForward runs MTP layer k (spec §3, "MTP layer") over a batch. For each
// position t of a span, the batch token is the token at t+1 and the hidden
// row (hc·D values, as Forward returns with WantHidden) is the main model's
// final streams at t; the span's Seq is the sequence's MTP state
// (NewMTPSeq), whose Len is the position of the span's first token. It
// returns the logits for the token at t+2 of the rows the spans ask for,
// and advances each sequence.
func (m *Model) MTPForward(ctx context.Context, k int, b *Batch, hidden []float32) ([]float32, error) {
	cfg := m.Cfg
	if k < 0 || k >= len(m.w.mtp) {
		return nil, fmt.Errorf("deepseekv4: MTP layer %d of %d", k, len(m.w.mtp))
	}
	if err := m.validate(b); err != nil {
		return nil, err
	}
	T, D, hc := len(b.Tokens), cfg.Hidden, cfg.HCMult
	if len(hidden) != T*hc*D {
		return nil, fmt.Errorf("deepseekv4: MTP: %d hidden values for %d tokens of %d", len(hidden), T, hc*D)
	}
	for i, s := range b.Spans {
		if err := s.Seq.Reserve(s.Seq.Len() + s.Len); err != nil {
			return nil, fmt.Errorf("deepseekv4: MTP span %d: %w", i, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &m.w.mtp[k]
	eps := float32(cfg.RMSEps)
	be := m.be
	be.ResetScratch(0)
	st, err := m.newStep(b, m.mtpLayout)
	if err != nil {
		return nil, err
	}
	// e = e_proj(RMSNorm_enorm(embed(token t+1))), one D-vector per token.
	emb := be.Scratch(compute.F32, T, D)
	be.Embed(emb, m.w.embed, st.tokens, 1)
	be.RMSNorm(emb, emb, w.eNorm, eps)
	e := be.Scratch(compute.F32, T, D)
	be.MatMul(e, emb, w.eProj)
	// Each stream: h_proj(RMSNorm_hnorm(h_j)) + e.
	hid := be.Scratch(compute.F32, T*hc, D)
	be.Write(hid, hidden)
	hn := be.Scratch(compute.F32, T*hc, D)
	be.RMSNorm(hn, hid, w.hNorm, eps)
	h := be.Scratch(compute.F32, T*hc, D)
	be.MatMul(h, hn, w.hProj)
	be.AddRepeated(h, e, hc)
	h = h.Reshape(T, hc*D)
	base := be.ScratchMark()
	m.layer(&w.block, cfg.MTP[k], m.mtpLayout, &m.mtpLayout.layers[k], st, h)
	be.ResetScratch(base)
	logits, err := m.head(&w.head, b, st, h)
	if err != nil {
		return nil, err
	}
	for _, s := range b.Spans {
		s.Seq.Advance(s.Len)
	}
	return logits, nil
}

// MTPLayers is the number of MTP layers the checkpoint has.
func (m *Model) MTPLayers() int { return len(m.w.mtp) }

// MTPWindow is how many past positions an MTP layer attends to. An MTP layer
// is a single window-only block, so the kv it stores for a position depends
// on that position's input alone: to draft at position t it needs only the
// inputs of t-MTPWindow+1..t, not the whole history.
func (m *Model) MTPWindow() int { return m.Cfg.Window }

// HiddenSize is the width of one token's final hidden state (hc·D).
func (m *Model) HiddenSize() int { return m.Cfg.HCMult * m.Cfg.Hidden }
