package cache

import (
	"fmt"

	"github.com/strata-inference/strata/compute"
)

// A speculative feed writes the state of tokens that may be rejected. Mark,
// before the feed, saves what the policies say the feed destroys; Rollback
// afterwards returns the sequence to the state after only the kept tokens:
//
//   - append slots are written once per position and read only by later
//     positions, so entries past the kept tokens are simply stale (they are
//     rewritten before anything reads them);
//   - a ring kind's feed of n tokens overwrites the slots of those n
//     positions: they are saved and the rejected positions' slots restored;
//   - a recurrent kind's state is overwritten wholesale, so it is saved and
//     restored to before the feed, and the kept tokens must be fed again
//     (Rollback says how many): recomputation instead of a checkpoint per
//     draft position, so a sequence's recurrent state costs its size once.

// undoBuf is a sequence's saved slots, reused from mark to mark.
type undoBuf struct {
	mem compute.Tensor // U8 [1, capacity]
}

func (u *undoBuf) ensure(be compute.Backend, n int64) error {
	if u.mem.Valid() && int64(u.mem.Cols) >= n {
		return nil
	}
	u.free(be)
	m, err := be.Alloc(compute.U8, 1, int(max(n, 1)))
	if err != nil {
		return fmt.Errorf("cache: undo buffer of %d bytes: %w", n, err)
	}
	u.mem = m
	return nil
}

func (u *undoBuf) free(be compute.Backend) {
	if u.mem.Valid() {
		be.Free(u.mem)
		u.mem = compute.Tensor{}
	}
}

// Undo rewinds one marked feed.
type Undo struct {
	seq       *Seq
	start, n  int
	regions   []compute.Region // pool -> undo buffer, in save order
	spans     []undoSpan       // ring slots saved, per table
	recompute bool             // the sequence has recurrent state
}

// undoSpan is one table's saved ring slots: the region of the feed's
// position q is regions[first+q].
type undoSpan struct {
	first int
	ring  bool
}

// Mark records what feeding the next n tokens will overwrite, so that the
// feed can be partly undone. n may not exceed a ring's size (a slot would
// be overwritten twice in one feed). The sequence must not be marked again
// before the Undo is rolled back or dropped.
func (s *Seq) Mark(n int) (*Undo, error) {
	u := &Undo{seq: s, start: s.n, n: n}
	var off int64
	for _, sp := range s.specs {
		switch sp.Kind() {
		case Ring:
			if n > sp.FixedSlots {
				return nil, fmt.Errorf("cache: cannot mark %d tokens: the %s ring holds %d", n, sp.Name, sp.FixedSlots)
			}
		case Recurrent:
			u.recompute = true
		}
	}
	for i, sp := range s.specs {
		for j := range s.tables[i] {
			switch sp.Kind() {
			case Ring:
				u.spans = append(u.spans, undoSpan{first: len(u.regions), ring: true})
				for q := range n {
					u.regions = append(u.regions, compute.Region{Dst: off, Src: s.slotOffset(i, j, (s.n+q)%sp.FixedSlots), Bytes: int64(sp.SlotBytes)})
					off += int64(sp.SlotBytes)
				}
			case Recurrent:
				u.spans = append(u.spans, undoSpan{first: len(u.regions)})
				for k := range sp.FixedSlots {
					u.regions = append(u.regions, compute.Region{Dst: off, Src: s.slotOffset(i, j, k), Bytes: int64(sp.SlotBytes)})
					off += int64(sp.SlotBytes)
				}
			}
		}
	}
	if len(u.regions) == 0 {
		return u, nil
	}
	be := s.pool.be
	if err := s.undo.ensure(be, off); err != nil {
		return nil, err
	}
	be.Copy(s.undo.mem, s.pool.mem, u.regions)
	return u, nil
}

// slotOffset is the byte offset of a slot in the pool.
func (s *Seq) slotOffset(i, j, k int) int64 {
	t := &s.tables[i][j]
	return int64(t.pages[k/t.perPage])*int64(s.pool.pageBytes) + int64(k%t.perPage)*int64(t.slotBytes)
}

// Rollback keeps the first keep of the marked tokens: the sequence's state
// becomes exactly what feeding only them would have made. It returns how
// many of the kept tokens the caller must feed again: 0 for sequences
// without recurrent state, keep for those with (their state is back to
// before the feed).
func (u *Undo) Rollback(keep int) (refeed int) {
	if keep < 0 || keep > u.n {
		panic(fmt.Sprintf("cache: rollback keeping %d of %d tokens", keep, u.n))
	}
	s := u.seq
	if s.n != u.start+u.n {
		panic(fmt.Sprintf("cache: rollback of a feed of %d tokens from %d, but the sequence holds %d", u.n, u.start, s.n))
	}
	from := keep // the first fed position whose ring slots come back
	if u.recompute {
		from = 0
	}
	var back []compute.Region
	for k, sp := range u.spans {
		end := len(u.regions)
		if k+1 < len(u.spans) {
			end = u.spans[k+1].first
		}
		rs := u.regions[sp.first:end]
		if sp.ring {
			rs = rs[from:]
		}
		for _, r := range rs {
			back = append(back, compute.Region{Dst: r.Src, Src: r.Dst, Bytes: r.Bytes})
		}
	}
	if len(back) > 0 {
		s.pool.be.Copy(s.pool.mem, s.undo.mem, back)
	}
	if u.recompute {
		s.n = u.start
		return keep
	}
	s.n = u.start + keep
	return 0
}
