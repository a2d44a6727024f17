package dsa

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
)

// step is one forward pass's metadata in the backend: token ids,
// positions, span boundaries, the rows that need logits, and the page
// table of every cache kind of every layer. It is built on the host and
// moved to the backend in one write.
type step struct {
	T      int
	tokens compute.Tensor // I32 [T]
	spans  compute.Spans
	rows   compute.Tensor // I32 [R]: the batch rows whose logits are asked for
	R      int
	// paged[spec][j] is the j-th layer's instance of spec (in the spec's
	// Layers order).
	paged [][]compute.Paged
}

// newStep builds b's metadata (the sequences' Len is the position of each
// span's first token).
func (m *Model) newStep(b *model.Batch) (*step, error) {
	lay := m.layout
	T, N := len(b.Tokens), len(b.Spans)
	seqs := make([]*cache.Seq, N)
	pool := b.Spans[0].Seq.Pool()
	for i, s := range b.Spans {
		seqs[i] = s.Seq
		if s.Seq.Pool() != pool {
			return nil, fmt.Errorf("%s: the sequences of one batch come from different pools", m.Cfg.Family.Name)
		}
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
	// Layout of the one host buffer: tokens, positions, span table, rows,
	// then the page tables.
	host := make([]int32, 0, 2*T+3*N+len(rows))
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
	type tab struct{ off, stride int }
	tabs := make([][]tab, len(lay.specs))
	for i, sp := range lay.specs {
		for j := range sp.Layers {
			stride := max(1, cache.MaxPages(seqs, i, j))
			tabs[i] = append(tabs[i], tab{len(host), stride})
			host = cache.AppendPageTable(host, seqs, i, j, stride)
		}
	}
	be := m.be
	all := be.Scratch(compute.I32, 1, len(host))
	be.Write(all, host)
	st := &step{T: T, R: len(rows)}
	st.tokens = all.Elems(0, T)
	st.spans.Pos = all.Elems(T, 2*T)
	st.spans.Tab = all.Elems(2*T, 2*T+3*N).Reshape(N, 3)
	st.rows = all.Elems(2*T+3*N, 2*T+3*N+len(rows))
	st.paged = make([][]compute.Paged, len(lay.specs))
	for i, sp := range lay.specs {
		f := lay.formats[i]
		for j := range sp.Layers {
			t := tabs[i][j]
			st.paged[i] = append(st.paged[i], compute.Paged{
				Pool:      pool.Mem(),
				Pages:     all.Elems(t.off, t.off+N*t.stride).Reshape(N, t.stride),
				PerPage:   sp.SlotsPerPage(pool.PageBytes()),
				SlotBytes: sp.SlotBytes,
				Format:    f.format, Width: f.width, Rope: f.rope,
			})
		}
	}
	return st, nil
}
