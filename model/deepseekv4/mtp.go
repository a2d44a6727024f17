package deepseekv4

import (
	"context"
	"fmt"

	"github.com/strata-inference/strata/cache"
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
// and advances each Seq.Len.
func (m *Model) MTPForward(ctx context.Context, k int, b *Batch, hidden []float32) ([]float32, error) {
	cfg := m.Cfg
	if k < 0 || k >= len(m.W.MTP) {
		return nil, fmt.Errorf("deepseekv4: MTP layer %d of %d", k, len(m.W.MTP))
	}
	if err := m.validate(b); err != nil {
		return nil, err
	}
	T, D, hc := len(b.Tokens), cfg.Hidden, cfg.HCMult
	if len(hidden) != T*hc*D {
		return nil, fmt.Errorf("deepseekv4: MTP: %d hidden values for %d tokens of %d", len(hidden), T, hc*D)
	}
	for i, s := range b.Spans {
		if err := s.Seq.Reserve(s.Seq.Len + s.Len); err != nil {
			return nil, fmt.Errorf("deepseekv4: MTP span %d: %w", i, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &m.W.MTP[k]
	eps := float32(cfg.RMSEps)
	m.s.reset()
	pos := make([]int32, T)
	for _, s := range b.Spans {
		for i := range s.Len {
			pos[s.Start+i] = int32(s.Seq.Len + i)
		}
	}
	// e = e_proj(RMSNorm_enorm(embed(token t+1))), one D-vector per token.
	emb := m.s.get(T * D)
	for t, tok := range b.Tokens {
		matrixRow(m.W.Embed, int(tok), emb[t*D:(t+1)*D])
	}
	m.be.RMSNorm(emb, emb, w.ENorm, T, D, eps)
	e := m.s.get(T * D)
	m.be.MatMul(e, emb, T, w.EProj)
	// Each stream: h_proj(RMSNorm_hnorm(h_j)) + e.
	hn := m.s.get(T * hc * D)
	m.be.RMSNorm(hn, hidden, w.HNorm, T*hc, D, eps)
	h := make([]float32, T*hc*D)
	m.be.MatMul(h, hn, T*hc, w.HProj)
	for t := range T {
		for j := range hc {
			axpy(h[(t*hc+j)*D:(t*hc+j+1)*D], 1, e[t*D:(t+1)*D])
		}
	}
	m.s.reset()
	m.layer(&w.Block, cfg.MTP[k], &m.mtpLayout.layers[k], b, pos, h)
	m.s.reset()
	logits := m.head(&w.Head, b, h)
	for _, s := range b.Spans {
		s.Seq.Len += s.Len
	}
	return logits, nil
}

// MTPLayers is the number of MTP layers the checkpoint has.
func (m *Model) MTPLayers() int { return len(m.W.MTP) }

// MTPWindow is how many past positions an MTP layer attends to. An MTP layer
// is a single window-only block, so the kv it stores for a position depends
// on that position's input alone: to draft at position t it needs only the
// inputs of t-MTPWindow+1..t, not the whole history.
func (m *Model) MTPWindow() int { return m.Cfg.Window }

// HiddenSize is the width of one token's final hidden state (hc·D).
func (m *Model) HiddenSize() int { return m.Cfg.HCMult * m.Cfg.Hidden }
