package cache

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/strata-inference/strata/compute"
)

// Pool is one region of backend memory cut into fixed-size pages, shared by
// every cache kind of every sequence. Pages are handed out whole and
// reference-counted: a page returns to the free list when its last holder
// lets it go. The pool counts the pages each kind holds (a shared page once).
// It is safe for concurrent use; the page contents are read and written
// only by the backend's ops and by the sequences' copy operations.
type Pool struct {
	be        compute.Backend
	mem       compute.Tensor // U8 [pages, pageBytes]
	pageBytes int

	copied atomic.Int64 // bytes copied between pages (forks, copy-on-write)

	mu   sync.Mutex
	free []int32        // free page ids, used as a stack
	refs []int32        // holders of each page
	kind []string       // the kind each held page was taken for
	used map[string]int // pages held, by kind name
}

// NewPool makes a pool of numPages pages of pageBytes bytes each in be's
// memory. pageBytes must be a positive multiple of 4.
func NewPool(be compute.Backend, pageBytes, numPages int) (*Pool, error) {
	if pageBytes <= 0 || pageBytes%4 != 0 {
		return nil, fmt.Errorf("cache: page size %d bytes is not a positive multiple of 4", pageBytes)
	}
	if numPages <= 0 || numPages > 1<<31-1 {
		return nil, fmt.Errorf("cache: %d pages", numPages)
	}
	mem, err := be.Alloc(compute.U8, numPages, pageBytes)
	if err != nil {
		return nil, fmt.Errorf("cache: pool of %d pages of %d bytes: %w", numPages, pageBytes, err)
	}
	p := &Pool{
		be:        be,
		mem:       mem,
		pageBytes: pageBytes,
		free:      make([]int32, numPages),
		refs:      make([]int32, numPages),
		kind:      make([]string, numPages),
		used:      map[string]int{},
	}
	// Hand out low page ids first.
	for i := range p.free {
		p.free[i] = int32(numPages - 1 - i)
	}
	return p, nil
}

// Close frees the pool's memory. No sequence may use it afterwards.
func (p *Pool) Close() { p.be.Free(p.mem) }

// Backend is the backend whose memory holds the pages.
func (p *Pool) Backend() compute.Backend { return p.be }

// Mem is the pages, U8 [NumPages, PageBytes], for the ops that read and
// write cache slots.
func (p *Pool) Mem() compute.Tensor { return p.mem }

// PageBytes is the size of one page.
func (p *Pool) PageBytes() int { return p.pageBytes }

// NumPages is the number of pages in the pool.
func (p *Pool) NumPages() int { return len(p.refs) }

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
	for _, id := range ids {
		p.refs[id] = 1
		p.kind[id] = kind
	}
	p.used[kind] += n
	return ids, true
}

// retain adds a holder to each page.
func (p *Pool) retain(ids []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if p.refs[id] <= 0 {
			panic(fmt.Sprintf("cache: retaining free page %d", id))
		}
		p.refs[id]++
	}
}

// release drops a holder of each page, freeing the pages nobody holds.
func (p *Pool) release(ids []int32) {
	if len(ids) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		switch p.refs[id] {
		case 0:
			panic(fmt.Sprintf("cache: releasing free page %d", id))
		case 1:
			p.free = append(p.free, id)
			p.used[p.kind[id]]--
		}
		p.refs[id]--
	}
}

// shared reports whether a page has more than one holder.
func (p *Pool) shared(id int32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refs[id] > 1
}

// copyPages copies whole pages (src[i] to dst[i]) in the backend.
func (p *Pool) copyPages(dst, src []int32) {
	if len(dst) == 0 {
		return
	}
	rs := make([]compute.Region, len(dst))
	pb := int64(p.pageBytes)
	for i := range dst {
		rs[i] = compute.Region{Dst: int64(dst[i]) * pb, Src: int64(src[i]) * pb, Bytes: pb}
	}
	p.copyRegions(rs)
}

// copyRegions copies byte ranges of the pool in the backend.
func (p *Pool) copyRegions(rs []compute.Region) {
	if len(rs) == 0 {
		return
	}
	p.be.Copy(p.mem, p.mem, rs)
	var n int64
	for _, r := range rs {
		n += r.Bytes
	}
	p.copied.Add(n)
}

// CopiedBytes is how many bytes the pool has copied from page to page
// (forks of ring and recurrent state, copy-on-write of shared pages).
func (p *Pool) CopiedBytes() int64 { return p.copied.Load() }

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

// PoolFor makes a pool in be just large enough for seqs sequences of tokens
// tokens each.
func PoolFor(be compute.Backend, specs []Spec, tokens, seqs int) (*Pool, error) {
	pb := PageBytesFor(specs)
	return NewPool(be, pb, max(1, seqs*TotalPages(specs, tokens, pb)))
}
