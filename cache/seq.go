package cache

import (
	"errors"
	"fmt"

	"github.com/strata-inference/strata/compute"
)

// ErrNoSpace is returned when the pool has too few free pages for a request.
var ErrNoSpace = errors.New("cache: not enough free pages")

// Table maps the slots of one layer's instance of a kind to pool pages:
// slot k is at byte (k mod PerPage)·SlotBytes of page Pages()[k/PerPage].
type Table struct {
	pages     []int32
	slotBytes int
	perPage   int
}

// Pages are the table's page ids, in slot order. The slice must not be changed.
func (t *Table) Pages() []int32 { return t.pages }

// PerPage is the number of slots one page holds.
func (t *Table) PerPage() int { return t.perPage }

// Capacity is the number of slots the table's pages hold.
func (t *Table) Capacity() int { return len(t.pages) * t.perPage }

// pagesFor is the number of pages that hold the first n slots.
func (t *Table) pagesFor(n int) int { return (n + t.perPage - 1) / t.perPage }

// Seq is the cache state of one sequence: a page table per kind per layer,
// and the number of tokens whose state it holds. Ring and recurrent kinds
// take their pages when the Seq is made; append kinds take pages as Reserve
// extends the context, and share them with the sequences forked from it.
// A Seq is used by one goroutine at a time.
type Seq struct {
	pool     *Pool
	specs    []Spec
	tables   [][]Table // [spec][index in spec.Layers]
	n        int       // tokens whose state the cache holds
	reserved int       // tokens the append kinds have pages for
	released bool
	undo     undoBuf
}

// NewSeq takes the fixed pages of every spec from the pool, all or none.
func NewSeq(pool *Pool, specs []Spec) (*Seq, error) {
	s := &Seq{pool: pool, specs: specs, tables: make([][]Table, len(specs))}
	for i, sp := range specs {
		if err := sp.Validate(pool.pageBytes); err != nil {
			return nil, err
		}
		if sp.SlotBytes%4 != 0 {
			return nil, fmt.Errorf("cache: spec %s: slot of %d bytes is not a multiple of 4", sp.Name, sp.SlotBytes)
		}
		s.tables[i] = make([]Table, len(sp.Layers))
		for j := range s.tables[i] {
			s.tables[i][j] = Table{slotBytes: sp.SlotBytes, perPage: sp.SlotsPerPage(pool.pageBytes)}
		}
	}
	var taken [][]int32
	for i, sp := range specs {
		if sp.Kind() == Append {
			continue
		}
		for j := range s.tables[i] {
			t := &s.tables[i][j]
			ids, ok := pool.alloc(sp.Name, t.pagesFor(sp.FixedSlots))
			if !ok {
				for _, ids := range taken {
					pool.release(ids)
				}
				return nil, ErrNoSpace
			}
			t.pages = ids
			taken = append(taken, ids)
		}
	}
	return s, nil
}

// Pool is the pool the sequence's pages come from.
func (s *Seq) Pool() *Pool { return s.pool }

// Specs returns the kinds the sequence holds.
func (s *Seq) Specs() []Spec { return s.specs }

// Table returns the page table of spec i for the j-th layer of spec.Layers.
func (s *Seq) Table(i, j int) *Table { return &s.tables[i][j] }

// Len is the number of tokens whose state the cache holds.
func (s *Seq) Len() int { return s.n }

// Advance records that the state of n more tokens has been written (a
// forward pass fed them). Reserve must have made room for them.
func (s *Seq) Advance(n int) {
	if n < 0 || s.n+n > s.reserved {
		panic(fmt.Sprintf("cache: advancing %d tokens past %d with room for %d", n, s.n, s.reserved))
	}
	s.n += n
}

// live is the number of slots of spec i that hold state for n tokens: every
// slot of a ring or recurrent kind, the first Slots(n) of an append kind.
func (s *Seq) live(i, n int) int {
	sp := s.specs[i]
	if sp.Kind() == Append {
		return sp.Slots(n)
	}
	return sp.FixedSlots
}

// change is Reserve's plan for one table: pages to take at the end, and
// shared pages (by index) to replace by private copies.
type change struct {
	t      *Table
	kind   string
	extra  int
	shared []int
}

// plan works out what Reserve(n) must do.
func (s *Seq) plan(n int) []change {
	var cs []change
	for i, sp := range s.specs {
		if sp.Kind() != Append {
			continue
		}
		from, to := sp.Slots(s.n), sp.Slots(n)
		for j := range s.tables[i] {
			t := &s.tables[i][j]
			c := change{t: t, kind: sp.Name, extra: max(0, t.pagesFor(to)-len(t.pages))}
			// Slots [from, to) are written by the feed: their pages must be
			// this sequence's alone.
			if to > from {
				for p := from / t.perPage; p < min(t.pagesFor(to), len(t.pages)); p++ {
					if s.pool.shared(t.pages[p]) {
						c.shared = append(c.shared, p)
					}
				}
			}
			if c.extra > 0 || len(c.shared) > 0 {
				cs = append(cs, c)
			}
		}
	}
	return cs
}

// Reserve makes the sequence ready to be fed up to a context of n tokens:
// append kinds get pages for n tokens, and every page the feed will write
// that is shared with another sequence is replaced by a private copy. It
// is all or none: ErrNoSpace when the pool is short, with nothing taken.
func (s *Seq) Reserve(n int) error {
	if s.released {
		return fmt.Errorf("cache: reserve on a released sequence")
	}
	cs := s.plan(n)
	need := 0
	for _, c := range cs {
		need += c.extra + len(c.shared)
	}
	if need == 0 {
		s.reserved = max(s.reserved, n)
		return nil
	}
	type take struct {
		c   change
		ids []int32
	}
	var taken []take
	for _, c := range cs {
		ids, ok := s.pool.alloc(c.kind, c.extra+len(c.shared))
		if !ok {
			for _, tk := range taken {
				s.pool.release(tk.ids)
			}
			return ErrNoSpace
		}
		taken = append(taken, take{c, ids})
	}
	for _, tk := range taken {
		t := tk.c.t
		fresh := tk.ids[:len(tk.c.shared)]
		old := make([]int32, len(tk.c.shared))
		for k, p := range tk.c.shared {
			old[k] = t.pages[p]
			t.pages[p] = fresh[k]
		}
		s.pool.copyPages(fresh, old)
		s.pool.release(old)
		t.pages = append(t.pages, tk.ids[len(tk.c.shared):]...)
	}
	s.reserved = max(s.reserved, n)
	return nil
}

// PagesFor is the number of pages Reserve(n) would take.
func (s *Seq) PagesFor(n int) int {
	need := 0
	for _, c := range s.plan(n) {
		need += c.extra + len(c.shared)
	}
	return need
}

// Pages is the number of page references the sequence holds (a page shared
// with another sequence counts for both).
func (s *Seq) Pages() int {
	n := 0
	for i := range s.tables {
		for j := range s.tables[i] {
			n += len(s.tables[i][j].pages)
		}
	}
	return n
}

// Release returns every page to the pool. The Seq must not be used afterwards.
func (s *Seq) Release() {
	if s.released {
		return
	}
	for i := range s.tables {
		for j := range s.tables[i] {
			t := &s.tables[i][j]
			s.pool.release(t.pages)
			t.pages = nil
		}
	}
	s.undo.free(s.pool.be)
	s.released = true
}

// Fork returns a new sequence holding exactly s's state: it shares the
// pages of s's append kinds that hold state (copying nothing) and copies
// the ring and recurrent kinds. Writing either sequence later copies a
// shared page first (Reserve), so neither sees the other's tokens.
func (s *Seq) Fork() (*Seq, error) {
	if s.released {
		return nil, fmt.Errorf("cache: fork of a released sequence")
	}
	f, err := NewSeq(s.pool, s.specs)
	if err != nil {
		return nil, err
	}
	var rs []compute.Region
	pb := int64(s.pool.pageBytes)
	for i, sp := range s.specs {
		for j := range s.tables[i] {
			from, to := &s.tables[i][j], &f.tables[i][j]
			if sp.Kind() == Append {
				to.pages = append([]int32(nil), from.pages[:from.pagesFor(sp.Slots(s.n))]...)
				s.pool.retain(to.pages)
				continue
			}
			// Copy the slots, not whole pages: a small ring leaves most
			// of its last page unused.
			for p := range from.pages {
				n := min(from.perPage, sp.FixedSlots-p*from.perPage) * from.slotBytes
				rs = append(rs, compute.Region{Dst: int64(to.pages[p]) * pb, Src: int64(from.pages[p]) * pb, Bytes: int64(n)})
			}
		}
	}
	s.pool.copyRegions(rs)
	f.n, f.reserved = s.n, s.n
	return f, nil
}

// Slot returns the memory of slot k of layer j's instance of spec i, as a
// U8 view of the pool (for tools and tests that read or write state
// directly).
func (s *Seq) Slot(i, j, k int) compute.Tensor {
	t := &s.tables[i][j]
	if k < 0 || k >= t.Capacity() {
		panic(fmt.Sprintf("cache: slot %d of %s beyond its %d", k, s.specs[i].Name, t.Capacity()))
	}
	page := s.pool.mem.Row(int(t.pages[k/t.perPage]))
	off := (k % t.perPage) * t.slotBytes
	return page.Elems(off, off+t.slotBytes)
}

// DistinctPages is the number of pool pages the sequences hold between
// them, a page shared by several counted once.
func DistinctPages(seqs ...*Seq) int {
	seen := map[int32]bool{}
	for _, s := range seqs {
		for i := range s.tables {
			for j := range s.tables[i] {
				for _, p := range s.tables[i][j].pages {
					seen[p] = true
				}
			}
		}
	}
	return len(seen)
}

// AppendPageTable appends to dst one row of stride page ids per sequence:
// the pages of layer j's instance of spec i (zero-padded). Stride must be
// at least MaxPages(seqs, i, j).
func AppendPageTable(dst []int32, seqs []*Seq, i, j, stride int) []int32 {
	for _, s := range seqs {
		pages := s.tables[i][j].pages
		if len(pages) > stride {
			panic(fmt.Sprintf("cache: %d pages in a page table of stride %d", len(pages), stride))
		}
		dst = append(dst, pages...)
		for range stride - len(pages) {
			dst = append(dst, 0)
		}
	}
	return dst
}

// MaxPages is the most pages any of seqs holds for layer j's instance of spec i.
func MaxPages(seqs []*Seq, i, j int) int {
	n := 0
	for _, s := range seqs {
		n = max(n, len(s.tables[i][j].pages))
	}
	return n
}

// Skip advances the sequence by n positions without writing their state.
// Only a caller for whom those positions' stale slots are harmless may use
// it: a draft layer whose state for a position depends on that position's
// input alone and which is fed the positions it reads before reading them.
func (s *Seq) Skip(n int) {
	if n < 0 {
		panic(fmt.Sprintf("cache: skipping %d positions", n))
	}
	if err := s.Reserve(s.n + n); err != nil {
		panic(fmt.Sprintf("cache: skip: %v", err))
	}
	s.n += n
}
