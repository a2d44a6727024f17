package hy4

import (
	"context"
	"fmt"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
)

// Forward runs one step over a ragged batch: every span continues its
// sequence at position Seq.Len(), every matmul runs once over all tokens,
// and each sequence's cache is appended to. It returns the logits the
// spans ask for, LogitRows(b) rows of VocabSize, in span order, and
// advances each sequence by its span's length.
//
// Forward reserves the pages the spans need first and fails without
// touching any cache when the pool is short. If ctx is cancelled mid-step
// the caches of the batch's sequences hold stale slots past their Len,
// which later feeds overwrite before reading.
func (m *Model) Forward(ctx context.Context, b *model.Batch) ([]float32, error) {
	if err := m.validate(b); err != nil {
		return nil, err
	}
	for i, s := range b.Spans {
		if err := s.Seq.Reserve(s.Seq.Len() + s.Len); err != nil {
			return nil, fmt.Errorf("hy4: span %d: %w", i, err)
		}
	}
	be, cfg := m.be, m.Cfg
	be.ResetScratch(0)
	st, err := m.newStep(b)
	if err != nil {
		return nil, err
	}
	T, C, D := st.T, cfg.HCMult, cfg.Hidden
	// The C residual channels of every token, each the token embedding at
	// first (spec §2).
	h := be.Scratch(compute.F32, T, C*D)
	be.Embed(h, m.w.embed, st.tokens, C)
	// The DSA selection of the latest full-indexer layer, which the
	// shared layers after it reuse.
	sel := be.Scratch(compute.I32, T, cfg.IndexTopK)
	cnt := be.Scratch(compute.I32, T, 1)
	base := be.ScratchMark()
	for l := range m.w.layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m.layer(&m.w.layers[l], l, st, h, sel, cnt)
		be.ResetScratch(base)
	}
	logits, err := m.head(st, h)
	if err != nil {
		return nil, err
	}
	for _, s := range b.Spans {
		s.Seq.Advance(s.Len)
	}
	return logits, nil
}

// layer runs decoder block L on the channels h [T, C·D] in place (spec
// §2): each sublayer reads x = Σ pre_c·h_c, computes y = Sublayer(RMSNorm
// x), and adds post_c·y to every channel c.
func (m *Model) layer(L *rLayer, l int, st *step, h, sel, cnt compute.Tensor) {
	be, cfg := m.be, m.Cfg
	T, C, D := st.T, cfg.HCMult, cfg.Hidden
	eps := float32(cfg.RMSEps)

	x := be.Scratch(compute.F32, T, D)
	post := be.Scratch(compute.F32, T, C)
	m.ihc.IHCPre(x, post, h, &L.attnHC, m.hc)
	be.RMSNorm(x, x, L.inputNorm, eps)
	m.ihc.IHCPost(h, m.attention(&L.attn, l, x, st, sel, cnt), post, m.hc)

	m.ihc.IHCPre(x, post, h, &L.ffnHC, m.hc)
	be.RMSNorm(x, x, L.postNorm, eps)
	y := be.Scratch(compute.F32, T, D)
	if L.dense != nil {
		m.gating.SwiGLU(y, x, L.dense)
	} else {
		m.mla.RoutedMoE(y, x, st.tokens, L.moe, m.routing)
	}
	m.ihc.IHCPost(h, y, post, m.hc)
}

// head computes the logits of the rows the spans ask for: the head mixer
// collapses their channels (HCHead: the same formula as a sublayer's pre
// weights, spec §2), then the final RMSNorm and lm_head.
func (m *Model) head(st *step, h compute.Tensor) ([]float32, error) {
	be, cfg := m.be, m.Cfg
	if st.R == 0 {
		return nil, be.Sync()
	}
	C, D := cfg.HCMult, cfg.Hidden
	hr := be.Scratch(compute.F32, st.R, C*D)
	be.GatherRows(hr, h, st.rows)
	x := be.Scratch(compute.F32, st.R, D)
	be.HCHead(x, hr, &m.w.head, compute.HCParams{HC: C, D: D, NormEps: float32(cfg.RMSEps), Eps: float32(cfg.HCEps)})
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
		return fmt.Errorf("hy4: a batch with no spans")
	}
	covered := 0
	seen := map[any]bool{}
	for i, s := range b.Spans {
		if s.Seq == nil {
			return fmt.Errorf("hy4: span %d has no sequence", i)
		}
		if s.Draft != nil {
			return fmt.Errorf("hy4: span %d carries a draft state, but the model has no draft head", i)
		}
		if seen[s.Seq] {
			return fmt.Errorf("hy4: span %d: sequence appears twice in one batch", i)
		}
		seen[s.Seq] = true
		if s.Len <= 0 || s.Start != covered || s.Start+s.Len > len(b.Tokens) {
			return fmt.Errorf("hy4: span %d covers tokens [%d,%d) of %d; spans must tile the batch in order", i, s.Start, s.Start+s.Len, len(b.Tokens))
		}
		covered += s.Len
		if end := s.Seq.Len() + s.Len; end > m.Cfg.MaxPosition {
			return fmt.Errorf("hy4: span %d reaches position %d, beyond the model's %d", i, end, m.Cfg.MaxPosition)
		}
	}
	if covered != len(b.Tokens) {
		return fmt.Errorf("hy4: spans cover %d of %d tokens", covered, len(b.Tokens))
	}
	for i, t := range b.Tokens {
		if t < 0 || int(t) >= m.Cfg.VocabSize {
			return fmt.Errorf("hy4: token %d at batch index %d is outside the vocabulary of %d", t, i, m.Cfg.VocabSize)
		}
	}
	return nil
}
