package cache

import (
	"fmt"
	"sort"
	"sync"
)

// Pool is one region of memory cut into fixed-size pages, shared by every cache
// kind of every sequence. Pages are handed out whole and returned whole; the
// pool counts the pages each kind holds. It is safe for concurrent use.
type Pool struct {
	pageBytes  int
	pageFloats int
	mem        []float32

	mu   sync.Mutex
	free []int32        // free page ids, used as a stack
	used map[string]int // pages held, by kind name
}

// NewPool makes a pool of numPages pages of pageBytes bytes each. pageBytes
// must be a positive multiple of 4 (the engine stores float32).
func NewPool(pageBytes, numPages int) (*Pool, error) {
	if pageBytes <= 0 || pageBytes%4 != 0 {
		return nil, fmt.Errorf("cache: page size %d bytes is not a positive multiple of 4", pageBytes)
	}
	if numPages <= 0 || numPages > 1<<31-1 {
		return nil, fmt.Errorf("cache: %d pages", numPages)
	}
	p := &Pool{
		pageBytes:  pageBytes,
		pageFloats: pageBytes / 4,
		mem:        make([]float32, pageBytes/4*numPages),
		free:       make([]int32, numPages),
		used:       map[string]int{},
	}
	// Hand out low page ids first.
	for i := range p.free {
		p.free[i] = int32(numPages - 1 - i)
	}
	return p, nil
}

// PageBytes is the size of one page.
func (p *Pool) PageBytes() int { return p.pageBytes }

// NumPages is the number of pages in the pool.
func (p *Pool) NumPages() int { return len(p.mem) / p.pageFloats }

// FreePages is the number of pages not held by anyone.
func (p *Pool) FreePages() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}

// UsedPages returns the pages held per kind name (kinds holding none are omitted).
func (p *Pool) UsedPages() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]int, len(p.used))
	for k, v := range p.used {
		if v > 0 {
			m[k] = v
		}
	}
	return m
}

// Kinds returns the kind names that have ever held pages, sorted.
func (p *Pool) Kinds() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ks []string
	for k := range p.used {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// alloc takes n pages for kind, all or none.
func (p *Pool) alloc(kind string, n int) ([]int32, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n > len(p.free) {
		return nil, false
	}
	ids := make([]int32, n)
	copy(ids, p.free[len(p.free)-n:])
	p.free = p.free[:len(p.free)-n]
	p.used[kind] += n
	return ids, true
}

// release returns pages taken for kind.
func (p *Pool) release(kind string, ids []int32) {
	if len(ids) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free = append(p.free, ids...)
	p.used[kind] -= len(ids)
	if p.used[kind] < 0 {
		panic(fmt.Sprintf("cache: kind %s released more pages than it held", kind))
	}
}

// page returns the memory of page id.
func (p *Pool) page(id int32) []float32 {
	off := int(id) * p.pageFloats
	return p.mem[off : off+p.pageFloats : off+p.pageFloats]
}

// DefaultPageBytes is the page size used when nothing else is asked for.
const DefaultPageBytes = 64 << 10

// PageBytesFor is the smallest multiple of DefaultPageBytes that holds the
// largest slot of specs.
func PageBytesFor(specs []Spec) int {
	pb := DefaultPageBytes
	for _, s := range specs {
		for s.SlotBytes > pb {
			pb += DefaultPageBytes
		}
	}
	return pb
}

// PoolFor makes a pool just large enough for seqs sequences of tokens tokens each.
func PoolFor(specs []Spec, tokens, seqs int) (*Pool, error) {
	pb := PageBytesFor(specs)
	return NewPool(pb, max(1, seqs*TotalPages(specs, tokens, pb)))
}
