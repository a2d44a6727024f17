package cpu

import (
	"fmt"

	"github.com/strata-inference/strata/compute"
)

// slots is one span's slots of a paged cache kind, in host memory.
type slots struct {
	pool       []float32
	pages      []int32
	perPage    int
	slotFloats int
	pageFloats int
}

// spanSlots resolves span s's slots of p.
func spanSlots(p compute.Paged, s int) slots {
	if p.Format != compute.SlotF32 {
		panic(fmt.Sprintf("cpu: cache slot format %d is not supported yet", p.Format))
	}
	pages := I32(p.Pages)
	stride := p.Pages.Cols
	return slots{
		pool:       words(p.Pool, p.Pool.Len()/4),
		pages:      pages[s*stride : (s+1)*stride],
		perPage:    p.PerPage,
		slotFloats: p.SlotBytes / 4,
		pageFloats: p.Pool.Cols / 4,
	}
}

// slot returns slot k's memory.
func (p slots) slot(k int) []float32 {
	off := int(p.pages[k/p.perPage])*p.pageFloats + (k%p.perPage)*p.slotFloats
	return p.pool[off : off+p.slotFloats : off+p.slotFloats]
}

// span is one row of compute.Spans.Tab.
type span struct{ start, n, pos0 int }

func spansOf(sp compute.Spans) []span {
	tab := I32(sp.Tab)
	out := make([]span, sp.Tab.Rows)
	for i := range out {
		out[i] = span{int(tab[3*i]), int(tab[3*i+1]), int(tab[3*i+2])}
	}
	return out
}

// StoreRing implements compute.Attention.
func (b *Backend) StoreRing(ring compute.Paged, size int, src compute.Tensor, sp compute.Spans) {
	sv, w := F32(src), src.Cols
	for i, s := range spansOf(sp) {
		r := spanSlots(ring, i)
		for p := max(s.pos0, s.pos0+s.n-size); p < s.pos0+s.n; p++ {
			t := s.start + p - s.pos0
			copy(r.slot(p%size), sv[t*w:(t+1)*w])
		}
	}
}
