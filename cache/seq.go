package cache

import (
	"errors"
	"fmt"
)

// ErrNoSpace is returned when the pool has too few free pages for a request.
var ErrNoSpace = errors.New("cache: not enough free pages")

// Table maps the slots of one layer's instance of a kind to pool memory.
type Table struct {
	pool       *Pool
	kind       string
	pages      []int32
	slotFloats int
	perPage    int
}

// Slot returns the memory of slot i (SlotBytes/4 float32s). The slot must be
// within the table's current capacity.
func (t *Table) Slot(i int) []float32 {
	pg := t.pool.page(t.pages[i/t.perPage])
	off := (i % t.perPage) * t.slotFloats
	return pg[off : off+t.slotFloats : off+t.slotFloats]
}

// Capacity is the number of slots the table's pages hold.
func (t *Table) Capacity() int { return len(t.pages) * t.perPage }

// Pages is the number of pages the table holds.
func (t *Table) Pages() int { return len(t.pages) }

// Seq is the cache state of one sequence: a page table per kind per layer.
// Fixed kinds take their pages when the Seq is made; growing kinds take pages
// as Reserve extends the context. A Seq is used by one goroutine at a time.
type Seq struct {
	pool   *Pool
	specs  []Spec
	tables [][]Table // [spec][index in spec.Layers]
	// Len is the number of tokens whose state the cache holds. The model
	// advances it; the scheduler reads it.
	Len      int
	reserved int
	released bool
}

// NewSeq takes the fixed pages of every spec from the pool, all or none.
func NewSeq(pool *Pool, specs []Spec) (*Seq, error) {
	s := &Seq{pool: pool, specs: specs, tables: make([][]Table, len(specs))}
	for i, sp := range specs {
		if err := sp.Validate(pool.pageBytes); err != nil {
			return nil, err
		}
		if sp.SlotBytes%4 != 0 {
			return nil, fmt.Errorf("cache: spec %s: slot of %d bytes is not whole float32s", sp.Name, sp.SlotBytes)
		}
		s.tables[i] = make([]Table, len(sp.Layers))
		for j := range s.tables[i] {
			s.tables[i][j] = Table{pool: pool, kind: sp.Name, slotFloats: sp.SlotBytes / 4, perPage: sp.SlotsPerPage(pool.pageBytes)}
		}
	}
	if err := s.grow(0, false); err != nil {
		return nil, err
	}
	return s, nil
}

// Specs returns the kinds the sequence holds.
func (s *Seq) Specs() []Spec { return s.specs }

// Table returns the page table of spec i for the j-th layer of spec.Layers.
func (s *Seq) Table(i, j int) *Table { return &s.tables[i][j] }

// Reserve makes room for a context of n tokens in every growing kind, all or
// none; it returns ErrNoSpace when the pool is short. It never shrinks.
func (s *Seq) Reserve(n int) error {
	if s.released {
		return fmt.Errorf("cache: reserve on a released sequence")
	}
	if n <= s.reserved {
		return nil
	}
	if err := s.grow(n, true); err != nil {
		return err
	}
	s.reserved = n
	return nil
}

// PagesFor is the number of extra pages Reserve(n) would take.
func (s *Seq) PagesFor(n int) int {
	extra := 0
	for i, sp := range s.specs {
		if !sp.Growing() {
			continue
		}
		for j := range s.tables[i] {
			t := &s.tables[i][j]
			if need := (sp.Slots(n) + t.perPage - 1) / t.perPage; need > len(t.pages) {
				extra += need - len(t.pages)
			}
		}
	}
	return extra
}

// grow takes pages so that growing kinds (if growing) or fixed kinds (if not) hold n tokens.
func (s *Seq) grow(n int, growing bool) error {
	type take struct {
		t   *Table
		ids []int32
	}
	var taken []take
	for i, sp := range s.specs {
		if sp.Growing() != growing {
			continue
		}
		for j := range s.tables[i] {
			t := &s.tables[i][j]
			need := (sp.Slots(n)+t.perPage-1)/t.perPage - len(t.pages)
			if need <= 0 {
				continue
			}
			ids, ok := s.pool.alloc(sp.Name, need)
			if !ok {
				for _, tk := range taken {
					s.pool.release(tk.t.kind, tk.ids)
					tk.t.pages = tk.t.pages[:len(tk.t.pages)-len(tk.ids)]
				}
				return ErrNoSpace
			}
			t.pages = append(t.pages, ids...)
			taken = append(taken, take{t, ids})
		}
	}
	return nil
}

// Pages is the number of pool pages the sequence holds.
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
			s.pool.release(t.kind, t.pages)
			t.pages = nil
		}
	}
	s.released = true
}
