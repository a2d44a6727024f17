package qwen35

import (
	"context"
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
)

// Forward runs one step over a ragged batch (spec §2): every span continues
// its sequence at position Seq.Len(), every matmul runs once over all
// tokens, and the convolution, the delta rule and attention read and
// overwrite each sequence's state in its cache slots. It returns the
// logits the spans ask for, LogitRows(b) rows of VocabSize, in span order,
// and advances each sequence by its span's length. Spans with a draft
// state also record there the hidden states the MTP layer reads.
//
// The delta rule runs token by token on every path (DeltaRule), so that a
// token's logits are the same bits however its sequence was split into
// steps and whatever shares its batch: prefill, decode, chunked, batched,
// restored from a snapshot or refed after a rolled-back speculation. With
// Options.ChunkedDeltaRule every span runs the chunked form instead (the
// reference's prefill form; bit-identical only across splits at multiples
// of 64).
//
// Forward reserves the pages the spans need first and fails without
// touching any cache when the pool is short. If ctx is cancelled mid-step
// the caches of the batch's sequences are left inconsistent: release them.
func (m *Model) Forward(ctx context.Context, b *model.Batch) ([]float32, error) {
	if err := m.validate(b); err != nil {
		return nil, err
	}
	for i, s := range b.Spans {
		if err := s.Seq.Reserve(s.Seq.Len() + s.Len); err != nil {
			return nil, fmt.Errorf("qwen35: span %d: %w", i, err)
		}
	}
	be := m.be
	be.ResetScratch(0)
	st, _, err := m.newStep(b, m.layout, m.mtpLayout, nil)
	if err != nil {
		return nil, err
	}
	x := be.Scratch(compute.F32, st.T, m.Cfg.Hidden)
	be.Embed(x, m.w.embed, st.tokens, 1)
	base := be.ScratchMark()
	for l := range m.w.layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m.layer(&m.w.layers[l], m.layout.layers[l], x, st)
		be.ResetScratch(base)
	}
	var record func(h compute.Tensor)
	if len(st.drafts) > 0 {
		record = func(h compute.Tensor) { be.StoreRing(st.draftHidden, HiddenRing, h, st.draftSpans) }
	}
	logits, err := m.head(x, m.w.norm, st, record)
	if err != nil {
		return nil, err
	}
	for _, s := range b.Spans {
		s.Seq.Advance(s.Len)
	}
	return logits, nil
}

// layer runs decoder layer L on the residual stream x [T, D] in place:
// x += mixer(norm(x)); x += ffn(norm(x)).
func (m *Model) layer(L *rLayer, refs layerRefs, x compute.Tensor, st *step) {
	be := m.be
	eps := float32(m.Cfg.RMSEps)
	h := be.Scratch(compute.F32, st.T, m.Cfg.Hidden)
	be.RMSNorm(h, x, L.inputNorm, eps)
	var y compute.Tensor
	switch L.kind {
	case Full:
		y = m.attention(L.attn, st.kind(refs.kv), h, st)
	case Linear:
		y = m.deltaNet(L.gdn, st.kind(refs.delta), st.kind(refs.conv), h, st)
	}
	be.AddRepeated(x, y, 1)
	be.RMSNorm(h, x, L.postNorm, eps)
	y = be.Scratch(compute.F32, st.T, m.Cfg.Hidden)
	if L.moe != nil {
		be.MoE(y, h, st.tokens, L.moe)
	} else {
		be.SwiGLU(y, h, L.mlp)
	}
	be.AddRepeated(x, y, 1)
}

// head computes the logits of the rows the spans ask for from the
// residual stream x: the final norm (norm) and the output projection. When
// record is set it first sees the normed hidden states of every row (what
// the MTP layer reads).
func (m *Model) head(x, norm compute.Tensor, st *step, record func(h compute.Tensor)) ([]float32, error) {
	be, cfg := m.be, m.Cfg
	eps := float32(cfg.RMSEps)
	var sel compute.Tensor
	if record != nil {
		// The norm is per row: normalising all rows, then gathering,
		// gives the rows' bits of gathering first.
		h := be.Scratch(compute.F32, st.T, cfg.Hidden)
		be.RMSNorm(h, x, norm, eps)
		record(h)
		if st.R == 0 {
			return nil, be.Sync()
		}
		sel = be.Scratch(compute.F32, st.R, cfg.Hidden)
		be.GatherRows(sel, h, st.rows)
	} else {
		if st.R == 0 {
			return nil, be.Sync()
		}
		sel = be.Scratch(compute.F32, st.R, cfg.Hidden)
		be.GatherRows(sel, x, st.rows)
		be.RMSNorm(sel, sel, norm, eps)
	}
	out := be.Scratch(compute.F32, st.R, cfg.VocabSize)
	be.MatMul(out, sel, m.w.output)
	logits := make([]float32, st.R*cfg.VocabSize)
	if err := be.Read(logits, out); err != nil {
		return nil, err
	}
	return logits, nil
}

// validate checks the batch before anything is computed or cached.
func (m *Model) validate(b *model.Batch) error {
	covered := 0
	seen := map[*cache.Seq]bool{}
	for i, s := range b.Spans {
		switch {
		case s.Seq == nil:
			return fmt.Errorf("qwen35: span %d has no sequence", i)
		case seen[s.Seq]:
			return fmt.Errorf("qwen35: span %d: sequence appears twice in one batch", i)
		case s.Len <= 0 || s.Start != covered || s.Start+s.Len > len(b.Tokens):
			return fmt.Errorf("qwen35: span %d covers tokens [%d,%d) of %d; spans must tile the batch in order", i, s.Start, s.Start+s.Len, len(b.Tokens))
		case s.Seq.Len()+s.Len > m.Cfg.MaxPosition:
			return fmt.Errorf("qwen35: span %d reaches position %d, beyond the model's %d", i, s.Seq.Len()+s.Len, m.Cfg.MaxPosition)
		}
		seen[s.Seq] = true
		covered += s.Len
	}
	if covered != len(b.Tokens) {
		return fmt.Errorf("qwen35: spans cover %d of %d tokens", covered, len(b.Tokens))
	}
	for i, t := range b.Tokens {
		if t < 0 || int(t) >= m.Cfg.VocabSize {
			return fmt.Errorf("qwen35: token %d at batch index %d is outside the vocabulary of %d", t, i, m.Cfg.VocabSize)
		}
	}
	return nil
}
