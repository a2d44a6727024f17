package qwen35

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
)

// meta is a step's I32 metadata, gathered on the host in one buffer and
// written to the backend once.
type meta struct {
	host []int32
	all  compute.Tensor
}

// put appends v and returns its offset.
func (m *meta) put(v ...int32) int {
	off := len(m.host)
	m.host = append(m.host, v...)
	return off
}

// upload writes the buffer to the backend's scratch.
func (m *meta) upload(be compute.Backend) {
	m.all = be.Scratch(compute.I32, 1, max(1, len(m.host)))
	if len(m.host) > 0 {
		be.Write(m.all.Elems(0, len(m.host)), m.host)
	}
}

// at is the uploaded values [off, off+n) as a rows×(n/rows) tensor.
func (m *meta) at(off, n, rows int) compute.Tensor {
	return m.all.Elems(off, off+n).Reshape(rows, n/max(rows, 1))
}

// pagedRefs are the offsets of a page table in a meta.
type pagedRef struct{ off, stride int }

// putTables appends the page table of every spec and layer of lay for seqs.
func (m *meta) putTables(seqs []*cache.Seq, lay *cacheLayout) [][]pagedRef {
	refs := make([][]pagedRef, len(lay.specs))
	for i, sp := range lay.specs {
		refs[i] = make([]pagedRef, len(sp.Layers))
		for j := range sp.Layers {
			stride := max(1, cache.MaxPages(seqs, i, j))
			refs[i][j] = pagedRef{len(m.host), stride}
			m.host = cache.AppendPageTable(m.host, seqs, i, j, stride)
		}
	}
	return refs
}

// pagedOf is the uploaded page tables of refs as the ops' paged views.
func (m *meta) pagedOf(refs [][]pagedRef, n int, pool *cache.Pool, lay *cacheLayout) [][]compute.Paged {
	out := make([][]compute.Paged, len(refs))
	for i, sp := range lay.specs {
		out[i] = make([]compute.Paged, len(refs[i]))
		for j, r := range refs[i] {
			out[i][j] = compute.Paged{
				Pool: pool.Mem(), Pages: m.at(r.off, n*r.stride, n),
				PerPage: sp.SlotsPerPage(pool.PageBytes()), SlotBytes: sp.SlotBytes,
				Format: lay.formats[i], Width: lay.widths[i],
			}
		}
	}
	return out
}

// step is one forward pass's metadata in the backend: token ids,
// positions, span boundaries, the rows that need logits, and the page
// table of every cache kind of every layer.
type step struct {
	T, R   int
	tokens compute.Tensor // I32 [T]
	spans  compute.Spans
	rows   compute.Tensor // I32 [R]: the batch rows whose logits are asked for
	paged  [][]compute.Paged
	// drafts: the spans that record hidden states for a draft state, and
	// the draft states' hidden ring (Forward with Span.Draft set).
	drafts      []int
	draftSpans  compute.Spans
	draftHidden compute.Paged
}

func (st *step) kind(r slotRef) compute.Paged {
	if r.spec < 0 {
		return compute.Paged{}
	}
	return st.paged[r.spec][r.idx]
}

// poolOf is the one pool of the sequences.
func poolOf(seqs []*cache.Seq) (*cache.Pool, error) {
	var pool *cache.Pool
	for _, s := range seqs {
		if pool == nil {
			pool = s.Pool()
		} else if s.Pool() != pool {
			return nil, fmt.Errorf("qwen35: the sequences of one batch come from different pools")
		}
	}
	return pool, nil
}

// newStep builds b's metadata for the kinds of lay (each span's sequence
// at its Len), with the draft states' hidden rings when spans carry one
// (draftLay: the draft states' layout). extra is more I32 data the step
// needs, returned as a tensor.
func (m *Model) newStep(b *model.Batch, lay, draftLay *cacheLayout, extra []int32) (*step, compute.Tensor, error) {
	T, N := len(b.Tokens), len(b.Spans)
	seqs := make([]*cache.Seq, N)
	for i, s := range b.Spans {
		seqs[i] = s.Seq
	}
	pool, err := poolOf(seqs)
	if err != nil {
		return nil, compute.Tensor{}, err
	}
	var rows []int32
	for _, s := range b.Spans {
		switch s.Logits {
		case model.LastLogits:
			rows = append(rows, int32(s.Start+s.Len-1))
		case model.AllLogits:
			for i := range s.Len {
				rows = append(rows, int32(s.Start+i))
			}
		}
	}
	var mt meta
	oTok := mt.put(b.Tokens...)
	oPos := len(mt.host)
	for _, s := range b.Spans {
		for i := range s.Len {
			mt.put(int32(s.Seq.Len() + i))
		}
	}
	oTab := len(mt.host)
	for _, s := range b.Spans {
		mt.put(int32(s.Start), int32(s.Len), int32(s.Seq.Len()))
	}
	oRows := mt.put(rows...)
	oExtra := mt.put(extra...)
	refs := mt.putTables(seqs, lay)
	st := &step{T: T, R: len(rows)}
	var drafts []*cache.Seq
	oDTab := len(mt.host)
	for i, s := range b.Spans {
		if s.Draft == nil {
			continue
		}
		if draftLay == nil || draftLay.hidden.spec < 0 {
			return nil, compute.Tensor{}, fmt.Errorf("qwen35: span %d has a draft state, but the model has no MTP layer", i)
		}
		if s.Draft.Pool() != pool {
			return nil, compute.Tensor{}, fmt.Errorf("qwen35: span %d's draft state is in another pool", i)
		}
		st.drafts = append(st.drafts, i)
		drafts = append(drafts, s.Draft)
		mt.put(int32(s.Start), int32(s.Len), int32(s.Seq.Len()))
	}
	var hidden pagedRef
	if len(drafts) > 0 {
		h := draftLay.hidden
		hidden = pagedRef{len(mt.host), max(1, cache.MaxPages(drafts, h.spec, h.idx))}
		mt.host = cache.AppendPageTable(mt.host, drafts, h.spec, h.idx, hidden.stride)
	}
	mt.upload(m.be)
	st.tokens = mt.at(oTok, T, 1)
	st.spans = compute.Spans{Pos: mt.at(oPos, T, 1), Tab: mt.at(oTab, 3*N, N)}
	st.rows = mt.at(oRows, len(rows), 1)
	st.paged = mt.pagedOf(refs, N, pool, lay)
	if n := len(drafts); n > 0 {
		st.draftSpans = compute.Spans{Tab: mt.at(oDTab, 3*n, n)}
		st.draftSpans.Pos = st.spans.Pos // StoreRing reads the table only
		h := draftLay.hidden
		sp := draftLay.specs[h.spec]
		st.draftHidden = compute.Paged{
			Pool: pool.Mem(), Pages: mt.at(hidden.off, n*hidden.stride, n),
			PerPage: sp.SlotsPerPage(pool.PageBytes()), SlotBytes: sp.SlotBytes,
			Format: compute.SlotF32, Width: sp.SlotBytes / 4,
		}
	}
	var ex compute.Tensor
	if len(extra) > 0 {
		ex = mt.at(oExtra, len(extra), 1)
	}
	return st, ex, nil
}
