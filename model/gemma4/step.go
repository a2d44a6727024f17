package gemma4

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
)

// step is one forward pass's metadata in the backend: token ids,
// positions, span boundaries, the rows that need logits, the order that
// makes the per-layer embeddings layer-major, and the page table of every
// cache kind of every layer. It is built on the host and moved to the
// backend in one write.
type step struct {
	T, R   int
	maxPos int // the largest position in the step
	tokens compute.Tensor
	spans  compute.Spans
	rows   compute.Tensor // I32 [R]: the batch rows whose logits are asked for
	// pleOrder is I32 [L·T]: entry i·T+t is t·L+i, the row of token t's
	// per-layer input for layer i in the token-major [T·L, P] view.
	pleOrder compute.Tensor
	// paged[spec][j] is the j-th layer's instance of spec.
	paged [][]compute.Paged
}

// newStep builds b's metadata (each span's first position is its
// sequence's Len).
func (m *Model) newStep(b *model.Batch) (*step, error) {
	T, N := len(b.Tokens), len(b.Spans)
	lay := m.layout
	seqs := make([]*cache.Seq, N)
	var pool *cache.Pool
	for i, s := range b.Spans {
		seqs[i] = s.Seq
		if pool == nil {
			pool = s.Seq.Pool()
		} else if s.Seq.Pool() != pool {
			return nil, fmt.Errorf("gemma4: the sequences of one batch come from different pools")
		}
	}
	var rows []int32
	st := &step{T: T}
	for _, s := range b.Spans {
		st.maxPos = max(st.maxPos, s.Seq.Len()+s.Len-1)
		switch s.Logits {
		case model.LastLogits:
			rows = append(rows, int32(s.Start+s.Len-1))
		case model.AllLogits:
			for i := range s.Len {
				rows = append(rows, int32(s.Start+i))
			}
		}
	}
	L := len(m.Cfg.Layers)
	ple := 0
	if m.Cfg.PLE > 0 {
		ple = L * T
	}
	// Layout of the one host buffer: tokens, positions, span table, rows,
	// the per-layer-embedding order, then the page tables.
	host := make([]int32, 0, 2*T+3*N+len(rows)+ple)
	host = append(host, b.Tokens...)
	for _, s := range b.Spans {
		for i := range s.Len {
			host = append(host, int32(s.Seq.Len()+i))
		}
	}
	for _, s := range b.Spans {
		host = append(host, int32(s.Start), int32(s.Len), int32(s.Seq.Len()))
	}
	host = append(host, rows...)
	if ple > 0 {
		for i := range L {
			for t := range T {
				host = append(host, int32(t*L+i))
			}
		}
	}
	type tab struct{ off, stride int }
	tabs := make([][]tab, len(lay.specs))
	for i, sp := range lay.specs {
		tabs[i] = make([]tab, len(sp.Layers))
		for j := range sp.Layers {
			stride := max(1, cache.MaxPages(seqs, i, j))
			tabs[i][j] = tab{len(host), stride}
			host = cache.AppendPageTable(host, seqs, i, j, stride)
		}
	}
	be := m.be
	all := be.Scratch(compute.I32, 1, len(host))
	be.Write(all, host)
	st.R = len(rows)
	at := 0
	next := func(n int) compute.Tensor {
		t := all.Elems(at, at+n)
		at += n
		return t
	}
	st.tokens = next(T)
	st.spans.Pos = next(T)
	st.spans.Tab = next(3*N).Reshape(N, 3)
	st.rows = next(len(rows))
	if ple > 0 {
		st.pleOrder = next(ple)
	}
	st.paged = make([][]compute.Paged, len(lay.specs))
	for i, sp := range lay.specs {
		st.paged[i] = make([]compute.Paged, len(sp.Layers))
		for j := range sp.Layers {
			t := tabs[i][j]
			st.paged[i][j] = compute.Paged{
				Pool:      pool.Mem(),
				Pages:     all.Elems(t.off, t.off+N*t.stride).Reshape(N, t.stride),
				PerPage:   sp.SlotsPerPage(pool.PageBytes()),
				SlotBytes: sp.SlotBytes,
				Format:    lay.format,
				Width:     slotValues(m.Cfg.Layers[sp.Layers[j]]),
			}
		}
	}
	return st, nil
}

// cacheOf is the paged view of the cache layer l reads.
func (st *step) cacheOf(lay *cacheLayout, l int) compute.Paged {
	r := lay.layers[l]
	return st.paged[r.spec][r.idx]
}
