package deepseekv4

import (
	"context"
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
)

// Forward runs one step over a ragged batch: every span continues its
// sequence at position Seq.Len(), every matmul runs once over all tokens,
// and each sequence's cache is read and updated in place. It returns the
// logits the spans ask for, LogitRows(b) rows of VocabSize, in span order,
// and advances each sequence by its span's length. The logits are the
// model's own buffer, valid until the next Forward or Draft: a decode step
// allocates nothing.
//
// Forward reserves the pages the spans need first and fails without touching
// any cache when the pool is short. If ctx is cancelled mid-step the caches of
// the batch's sequences are left inconsistent: release them.
func (m *Model) Forward(ctx context.Context, b *Batch) ([]float32, error) {
	if err := m.validate(b); err != nil {
		return nil, err
	}
	for i, s := range b.Spans {
		if err := s.Seq.Reserve(s.Seq.Len() + s.Len); err != nil {
			return nil, fmt.Errorf("deepseekv4: span %d: %w", i, err)
		}
	}
	be := m.be
	be.ResetScratch(0)
	st, err := m.newStep(b, m.layout, &m.fwd)
	if err != nil {
		return nil, err
	}
	cfg := m.Cfg
	T, D, hc := st.T, cfg.Hidden, cfg.HCMult
	// Streams: every token's embedding copied into hc streams.
	h := be.Scratch(compute.F32, T, hc*D)
	be.Embed(h, m.w.embed, st.tokens, hc)
	// With a fused mHC, each layer leaves its FFN's output for the next
	// layer's first op to write back (c, outside the layers' scratch).
	var c *siteOut
	if m.fm != nil {
		c = &siteOut{y: be.Scratch(compute.F32, T, D), post: be.Scratch(compute.F32, T, hc), comb: be.Scratch(compute.F32, T, hc*hc)}
	}
	base := be.ScratchMark()
	for l := range m.w.layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m.layer(&m.w.layers[l], cfg.Layers[l], m.layout, &m.layout.layers[l], st, h, c)
		be.ResetScratch(base)
		// The layer's ops start while the next layer's are queued.
		if m.sub != nil {
			m.sub.Submit()
		}
	}
	if c != nil && c.pending {
		be.HCPost(h, c.y, c.post, c.comb, m.hcp)
	}
	if err := m.recordHidden(b, h); err != nil {
		return nil, err
	}
	logits, err := m.head(&m.w.head, st, h, &m.fwd)
	if err != nil {
		return nil, err
	}
	for _, s := range b.Spans {
		s.Seq.Advance(s.Len)
	}
	return logits, nil
}

// recordHidden stores, for the spans that carry a draft state, their
// tokens' final streams h in its hidden ring, where the MTP layer reads
// them.
func (m *Model) recordHidden(b *Batch, h compute.Tensor) error {
	pb := &m.fwd
	drafts, tab := pb.drfts[:0], pb.rtab[:0]
	defer func() { pb.drfts, pb.rtab = drafts[:0], tab[:0] }()
	for _, s := range b.Spans {
		if s.Draft != nil {
			if m.mtpLayout.hidden.spec < 0 {
				return fmt.Errorf("deepseekv4: a draft state for a model without MTP layers")
			}
			drafts = append(drafts, s.Draft)
			tab = append(tab, int32(s.Start), int32(s.Len), int32(s.Seq.Len()))
		}
	}
	if len(drafts) == 0 {
		return nil
	}
	ring, sp, err := m.ringOf(drafts, tab, pb)
	if err != nil {
		return err
	}
	m.be.StoreRing(ring, m.Cfg.hiddenRing(), h, sp)
	return nil
}

// ringOf is the hidden ring of draft states and a span table for them
// (rows of start, length and first position), in the backend, through the
// pass's buffers pb.
func (m *Model) ringOf(drafts []*cache.Seq, tab []int32, pb *passBufs) (compute.Paged, compute.Spans, error) {
	ref := m.mtpLayout.hidden
	stride := max(1, cache.MaxPages(drafts, ref.spec, ref.idx))
	host := cache.AppendPageTable(append(pb.ring.start(), tab...), drafts, ref.spec, ref.idx, stride)
	pool := drafts[0].Pool()
	for _, d := range drafts {
		if d.Pool() != pool {
			return compute.Paged{}, compute.Spans{}, fmt.Errorf("deepseekv4: draft states from different pools")
		}
	}
	all := pb.ring.upload(m.be, host)
	N := len(drafts)
	sp := compute.Spans{Tab: all.Elems(0, 3*N).Reshape(N, 3)}
	sp.Pos = sp.Tab // StoreRing reads the table only
	spec := m.mtpLayout.specs[ref.spec]
	ring := compute.Paged{
		Pool: pool.Mem(), Pages: all.Elems(3*N, 3*N+N*stride).Reshape(N, stride),
		PerPage: spec.SlotsPerPage(pool.PageBytes()), SlotBytes: spec.SlotBytes,
		Format: compute.SlotF32, Width: spec.SlotBytes / 4,
	}
	return ring, sp, nil
}

// siteOut is an mHC site's output not yet written back to the streams:
// the FFN's y with its post and comb, for the next layer's first op
// (FusedMixing).
type siteOut struct {
	y, post, comb compute.Tensor
	pending       bool
}

// layer runs decoder block L on the streams h [T, hc·D] in place, its
// cache kinds found through refs. With c (a FusedMixing backend), the
// block first writes back c's pending output, and leaves its FFN's in c.
func (m *Model) layer(L *rLayer, spec LayerSpec, lay *cacheLayout, refs *layerRefs, st *step, h compute.Tensor, c *siteOut) {
	be, cfg := m.be, m.Cfg
	T, D, hc := st.T, cfg.Hidden, cfg.HCMult
	eps := float32(cfg.RMSEps)

	m.ahead(L, aheadIn)
	x := be.Scratch(compute.F32, T, D)
	post := be.Scratch(compute.F32, T, hc)
	comb := be.Scratch(compute.F32, T, hc*hc)
	if c != nil {
		var y, p, cb compute.Tensor
		if c.pending {
			y, p, cb = c.y, c.post, c.comb
		}
		m.fm.HCPostPreNorm(h, y, p, cb, x, post, comb, &L.hcAttn, m.hcp, L.attnNorm, eps)
	} else {
		be.HCPre(x, post, comb, h, &L.hcAttn, m.hcp)
		be.RMSNorm(x, x, L.attnNorm, eps)
	}
	y := m.attention(L, spec, lay, refs, x, st)
	m.ahead(L, aheadShared)

	var y2, post2, comb2 compute.Tensor
	x2 := be.Scratch(compute.F32, T, D)
	if c != nil {
		y2, post2, comb2 = c.y, c.post, c.comb
		m.fm.HCPostPreNorm(h, y, post, comb, x2, post2, comb2, &L.hcFFN, m.hcp, L.ffnNorm, eps)
	} else {
		be.HCPost(h, y, post, comb, m.hcp)
		post2, comb2 = be.Scratch(compute.F32, T, hc), be.Scratch(compute.F32, T, hc*hc)
		be.HCPre(x2, post2, comb2, h, &L.hcFFN, m.hcp)
		be.RMSNorm(x2, x2, L.ffnNorm, eps)
		y2 = be.Scratch(compute.F32, T, D)
	}
	if m.ep != nil {
		m.ep.moe(y2, x2, st.tokens, &L.moe)
	} else {
		be.MoE(y2, x2, st.tokens, &L.moe)
	}
	if c != nil {
		c.pending = true
	} else {
		be.HCPost(h, y2, post2, comb2, m.hcp)
	}
	m.join(0) // the caller resets the scratch the lanes used
}

// head computes the logits of the rows the spans ask for: collapse the
// streams with hc_head, RMSNorm, and the output projection, read into the
// pass's logits buffer.
func (m *Model) head(w *rHead, st *step, h compute.Tensor, pb *passBufs) ([]float32, error) {
	be, cfg := m.be, m.Cfg
	R := st.R
	if R == 0 {
		return nil, be.Sync()
	}
	sel := be.Scratch(compute.F32, R, h.Cols)
	be.GatherRows(sel, h, st.rows)
	x := be.Scratch(compute.F32, R, cfg.Hidden)
	be.HCHead(x, sel, &w.hc, m.hcp)
	be.RMSNorm(x, x, w.norm, float32(cfg.RMSEps))
	out := be.Scratch(compute.F32, R, cfg.VocabSize)
	be.MatMul(out, x, m.w.output)
	return pb.readLogits(be, out)
}
