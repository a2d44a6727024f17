package deepseekv4

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model"
)

// Every fixed kind of a DeepSeek-V4 sequence (window rings, compressor
// partial windows and overlap halves) is a ring indexed by position modulo
// its size, and growing kinds only append: a compressed entry or indexer key
// for a window that closes at position q is written when q is fed and read
// only by queries at q or later. So feeding positions p..p+n-1 overwrites
// exactly the ring slots of those positions, and undoing the feed past p+k
// means restoring those slots for p+k..p+n-1 and setting Len back; stale
// entries beyond are rewritten before anything reads them.

// ringUndo is the saved ring slots of one marked feed.
type ringUndo struct {
	seq   *cache.Seq
	start int
	n     int
	// saved[i][j] holds, for fixed spec i and its layer j, the n slots
	// (start..start+n-1 mod size) as they were.
	saved [][][]float32
}

// Mark implements model.Rewinder for main and MTP sequences. n may not
// exceed the smallest ring, or a slot would be written twice in one feed.
func (m *Model) Mark(seq *cache.Seq, n int) (model.Undo, error) {
	specs := seq.Specs()
	u := &ringUndo{seq: seq, start: seq.Len, n: n, saved: make([][][]float32, len(specs))}
	for i, sp := range specs {
		if sp.Growing() {
			continue
		}
		if n > sp.FixedSlots {
			return nil, fmt.Errorf("deepseekv4: cannot mark %d tokens: the %s ring holds %d", n, sp.Name, sp.FixedSlots)
		}
		u.saved[i] = make([][]float32, len(sp.Layers))
		for j := range sp.Layers {
			tab := seq.Table(i, j)
			w := tab.Slot(0)
			buf := make([]float32, n*len(w))
			for k := range n {
				copy(buf[k*len(w):], tab.Slot((u.start+k)%sp.FixedSlots))
			}
			u.saved[i][j] = buf
		}
	}
	return u, nil
}

// Rollback implements model.Undo.
func (u *ringUndo) Rollback(keep int) {
	if keep < 0 || keep > u.n {
		panic(fmt.Sprintf("deepseekv4: rollback keeping %d of %d tokens", keep, u.n))
	}
	specs := u.seq.Specs()
	for i, sp := range specs {
		if u.saved[i] == nil {
			continue
		}
		for j := range sp.Layers {
			tab := u.seq.Table(i, j)
			w := len(tab.Slot(0))
			for k := keep; k < u.n; k++ {
				copy(tab.Slot((u.start+k)%sp.FixedSlots), u.saved[i][j][k*w:(k+1)*w])
			}
		}
	}
	u.seq.Len = u.start + keep
}

var _ model.Rewinder = (*Model)(nil)
