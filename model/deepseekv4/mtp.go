package deepseekv4

import (
	"context"
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
)

var _ model.Drafter = (*Model)(nil)

// DraftSpecs implements model.Drafter: the MTP layers' window rings and the
// ring of hidden streams they read (none without MTP layers).
func (m *Model) DraftSpecs() []cache.Spec { return m.mtpLayout.specs }

// MTPCacheSpecs is DraftSpecs.
func (m *Model) MTPCacheSpecs() []cache.Spec { return m.mtpLayout.specs }

// Draft implements model.Drafter with the first MTP layer (spec §3, "MTP
// layer"): for each position t of a span, it reads the hidden streams of t
// from the draft state and embeds the batch token (the token at t+1). Its
// logits are the model's own buffer, valid until the next Draft or Forward.
func (m *Model) Draft(ctx context.Context, b *Batch) ([]float32, error) {
	if len(m.w.mtp) == 0 {
		return nil, fmt.Errorf("deepseekv4: the checkpoint has no MTP layer")
	}
	return m.mtpForward(ctx, 0, b, nil)
}

// MTPForward runs MTP layer k over a batch with the hidden streams given
// (hc·D values per token: the main model's final streams at each position),
// instead of the draft state's: the MTP layer checked on its own.
func (m *Model) MTPForward(ctx context.Context, k int, b *Batch, hidden []float32) ([]float32, error) {
	if k < 0 || k >= len(m.w.mtp) {
		return nil, fmt.Errorf("deepseekv4: MTP layer %d of %d", k, len(m.w.mtp))
	}
	cfg := m.Cfg
	if n := len(b.Tokens) * cfg.HCMult * cfg.Hidden; len(hidden) != n {
		return nil, fmt.Errorf("deepseekv4: MTP: %d hidden values for %d tokens of %d", len(hidden), len(b.Tokens), cfg.HCMult*cfg.Hidden)
	}
	return m.mtpForward(ctx, k, b, hidden)
}

// mtpForward runs MTP layer k over b, reading the hidden streams from
// hidden, or when it is nil from the draft states (and then recording the
// layer's own output streams as the hidden state of the position after
// each span's last, for drafting further).
func (m *Model) mtpForward(ctx context.Context, k int, b *Batch, hidden []float32) ([]float32, error) {
	cfg := m.Cfg
	if err := m.validate(b); err != nil {
		return nil, err
	}
	T, D, hc := len(b.Tokens), cfg.Hidden, cfg.HCMult
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
	st, err := m.newStep(b, m.mtpLayout, &m.mtp)
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
	if hidden != nil {
		be.Write(hid, hidden)
	} else {
		be.LoadRing(hid.Reshape(T, hc*D), st.kind(m.mtpLayout.hidden), cfg.hiddenRing(), st.spans)
	}
	hn := be.Scratch(compute.F32, T*hc, D)
	be.RMSNorm(hn, hid, w.hNorm, eps)
	h := be.Scratch(compute.F32, T*hc, D)
	be.MatMul(h, hn, w.hProj)
	be.AddRepeated(h, e, hc)
	h = h.Reshape(T, hc*D)
	base := be.ScratchMark()
	m.layer(&w.block, cfg.MTP[k], m.mtpLayout, &m.mtpLayout.layers[k], st, h, nil)
	be.ResetScratch(base)
	if hidden == nil {
		// The layer's output streams at a span's last position stand in
		// for the main model's at the next, which drafting reaches before
		// the main model does.
		pb := &m.mtp
		drafts, tab := pb.drfts[:0], pb.rtab[:0]
		for _, s := range b.Spans {
			drafts = append(drafts, s.Seq)
			tab = append(tab, int32(s.Start+s.Len-1), 1, int32(s.Seq.Len()+s.Len))
		}
		pb.drfts, pb.rtab = drafts[:0], tab[:0]
		ring, sp, err := m.ringOf(drafts, tab, pb)
		if err != nil {
			return nil, err
		}
		be.StoreRing(ring, cfg.hiddenRing(), h, sp)
	}
	logits, err := m.head(&w.head, st, h, &m.mtp)
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

// DraftWindow implements model.Drafter. An MTP layer is a single
// window-only block, so the kv it stores for a position depends on that
// position's input alone: to draft at position t it needs only the inputs
// of t-window+1..t, not the whole history.
func (m *Model) DraftWindow() int { return m.Cfg.Window }

// HiddenSize is the width of one token's final hidden state (hc·D).
func (m *Model) HiddenSize() int { return m.Cfg.HCMult * m.Cfg.Hidden }
