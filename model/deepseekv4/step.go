package deepseekv4

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
	// paged[spec][j] is layer j's instance of spec (in the layout's order).
	paged [][]compute.Paged
}

// newStep builds b's metadata for the kinds of lay (the sequences' Len is
// the position of each span's first token) in the pass's buffers pb; the
// step is valid until the next newStep with pb.
func (m *Model) newStep(b *Batch, lay *cacheLayout, pb *passBufs) (*step, error) {
	T, N := len(b.Tokens), len(b.Spans)
	seqs := pb.seqs[:0]
	var pool *cache.Pool
	for _, s := range b.Spans {
		seqs = append(seqs, s.Seq)
		if pool == nil {
			pool = s.Seq.Pool()
		} else if s.Seq.Pool() != pool {
			return nil, fmt.Errorf("deepseekv4: the sequences of one batch come from different pools")
		}
	}
	pb.seqs = seqs
	rows := pb.rows[:0]
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
	pb.rows = rows
	// Layout of the one host buffer: tokens, positions, span table, rows,
	// then the page tables.
	host := pb.meta.start()
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
	if len(pb.tabs) != len(lay.specs) {
		pb.tabs = make([][]pageTab, len(lay.specs))
		for i, sp := range lay.specs {
			pb.tabs[i] = make([]pageTab, len(sp.Layers))
		}
	}
	tabs := pb.tabs
	for i, sp := range lay.specs {
		for j := range sp.Layers {
			stride := max(1, cache.MaxPages(seqs, i, j))
			tabs[i][j] = pageTab{len(host), stride}
			host = cache.AppendPageTable(host, seqs, i, j, stride)
		}
	}
	all := pb.meta.upload(m.be, host)
	st := &pb.st
	st.T, st.R = T, len(rows)
	st.tokens = all.Elems(0, T)
	st.spans.Pos = all.Elems(T, 2*T)
	st.spans.Tab = all.Elems(2*T, 2*T+3*N).Reshape(N, 3)
	st.rows = all.Elems(2*T+3*N, 2*T+3*N+len(rows))
	if len(st.paged) != len(lay.specs) {
		st.paged = make([][]compute.Paged, len(lay.specs))
		for i, sp := range lay.specs {
			st.paged[i] = make([]compute.Paged, len(sp.Layers))
		}
	}
	for i, sp := range lay.specs {
		for j := range sp.Layers {
			t := tabs[i][j]
			st.paged[i][j] = compute.Paged{
				Pool:      pool.Mem(),
				Pages:     all.Elems(t.off, t.off+N*t.stride).Reshape(N, t.stride),
				PerPage:   sp.SlotsPerPage(pool.PageBytes()),
				SlotBytes: sp.SlotBytes,
				Format:    lay.formats[i].format,
				Width:     lay.formats[i].width,
				Rope:      lay.formats[i].rope,
			}
		}
	}
	return st, nil
}

// kind returns the paged view of one layer's kind, or the zero Paged when
// the layer has none.
func (st *step) kind(r slotRef) compute.Paged {
	if r.spec < 0 {
		return compute.Paged{}
	}
	return st.paged[r.spec][r.idx]
}
