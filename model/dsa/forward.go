package dsa

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
			return nil, fmt.Errorf("%s: span %d: %w", m.Cfg.Family.Name, i, err)
		}
	}
	be, cfg := m.be, m.Cfg
	be.ResetScratch(0)
	st, err := m.newStep(b)
	if err != nil {
		return nil, err
	}
	T, D := st.T, cfg.Hidden
	h := be.Scratch(compute.F32, T, D)
	be.Embed(h, m.w.embed, st.tokens, 1)
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

// layer runs decoder block L on the residual stream h [T, D] in place
// (spec §3): h += Attn(RMSNorm_input(h)); h += FFN(RMSNorm_post(h)).
func (m *Model) layer(L *rLayer, l int, st *step, h, sel, cnt compute.Tensor) {
	be, cfg := m.be, m.Cfg
	T, D := st.T, cfg.Hidden
	eps := float32(cfg.RMSEps)

	x := be.Scratch(compute.F32, T, D)
	be.RMSNorm(x, h, L.inputNorm, eps)
	be.AddRepeated(h, m.attention(&L.attn, l, x, st, sel, cnt), 1)

	be.RMSNorm(x, h, L.postNorm, eps)
	y := be.Scratch(compute.F32, T, D)
	if L.dense != nil {
		m.gating.SwiGLU(y, x, L.dense)
	} else {
		m.mla.RoutedMoE(y, x, st.tokens, L.moe, m.routing)
	}
	be.AddRepeated(h, y, 1)
}

// head computes the logits of the rows the spans ask for: the final
// RMSNorm and lm_head.
func (m *Model) head(st *step, h compute.Tensor) ([]float32, error) {
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
	name := m.Cfg.Family.Name
	if len(b.Spans) == 0 {
		return fmt.Errorf("%s: a batch with no spans", name)
	}
	covered := 0
	seen := map[any]bool{}
	for i, s := range b.Spans {
		if s.Seq == nil {
			return fmt.Errorf("%s: span %d has no sequence", name, i)
		}
		if s.Draft != nil {
			return fmt.Errorf("%s: span %d carries a draft state, but the model has no draft head", name, i)
		}
		if seen[s.Seq] {
			return fmt.Errorf("%s: span %d: sequence appears twice in one batch", name, i)
		}
		seen[s.Seq] = true
		if s.Len <= 0 || s.Start != covered || s.Start+s.Len > len(b.Tokens) {
			return fmt.Errorf("%s: span %d covers tokens [%d,%d) of %d; spans must tile the batch in order", name, i, s.Start, s.Start+s.Len, len(b.Tokens))
		}
		covered += s.Len
		if end := s.Seq.Len() + s.Len; end > m.Cfg.MaxPosition {
			return fmt.Errorf("%s: span %d reaches position %d, beyond the model's %d", name, i, end, m.Cfg.MaxPosition)
		}
	}
	if covered != len(b.Tokens) {
		return fmt.Errorf("%s: spans cover %d of %d tokens", name, covered, len(b.Tokens))
	}
	for i, t := range b.Tokens {
		if t < 0 || int(t) >= m.Cfg.VocabSize {
			return fmt.Errorf("%s: token %d at batch index %d is outside the vocabulary of %d", name, t, i, m.Cfg.VocabSize)
		}
	}
	return nil
}
