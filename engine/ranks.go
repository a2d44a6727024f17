package engine

import (
	"fmt"
	"slices"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
)

// RankedModel is a model that runs on several ranks with data-parallel
// attention (deepseekv4.Parallel): each sequence's cache lives in the pool
// of one rank, its home, and that rank computes it. The engine then keeps
// one pool of Config.Pages pages on every rank's backend, with the same
// policies in each: a new request goes to the pool with the most free pages
// (a prefix hit to its snapshot's pool, where the state is), a request
// short of pages preempts the latest-arriving request of its own pool, and
// snapshots are evicted from the pool that needs the room.
type RankedModel interface {
	model.Model
	// RankBackends are the ranks' backends, in rank order.
	RankBackends() []compute.Backend
}

// newPools makes the engine's pools: one in the model's backend, or one in
// each rank's backend for a RankedModel.
func newPools(m model.Model, pageBytes, pages int) ([]*cache.Pool, error) {
	bes := []compute.Backend{m.Backend()}
	if rm, ok := m.(RankedModel); ok {
		bes = rm.RankBackends()
	}
	var pools []*cache.Pool
	for r, be := range bes {
		p, err := cache.NewPool(be, pageBytes, pages)
		if err != nil {
			for _, q := range pools {
				q.Close()
			}
			if len(bes) > 1 {
				return nil, fmt.Errorf("engine: rank %d's pool: %w", r, err)
			}
			return nil, err
		}
		pools = append(pools, p)
	}
	return pools, nil
}

// Pools are the engine's cache pools, one per rank (one for a model on
// one backend).
func (e *Engine) Pools() []*cache.Pool { return slices.Clone(e.pools) }

// poolFor is the pool a sequence admitted now takes its pages from: the
// prefix hit's, else the one with the most free pages (the lowest rank on
// ties).
func (e *Engine) poolFor(hit *snapshot) *cache.Pool {
	if hit != nil {
		return hit.seq.Pool()
	}
	best := e.pools[0]
	for _, p := range e.pools[1:] {
		if p.FreePages() > best.FreePages() {
			best = p
		}
	}
	return best
}

// evictFor frees the least recently used prefix snapshot in pool other
// than keep; false when there is none.
func (e *Engine) evictFor(pool *cache.Pool, keep *snapshot) bool {
	p := e.prefix
	if p == nil {
		return false
	}
	for el := p.lru.Back(); el != nil; el = el.Prev() {
		if s := el.Value.(*snapshot); s != keep && s.seq.Pool() == pool {
			p.drop(s)
			return true
		}
	}
	return false
}

// victimFor is the latest-arriving running request that holds pages in
// s's pool and that skip does not exclude (nil when there is none):
// preempting a request of another rank's pool would not make room.
func (e *Engine) victimFor(s *seq, skip func(*seq) bool) *seq {
	pool := s.cs.Pool()
	for i := len(e.running) - 1; i >= 0; i-- {
		v := e.running[i]
		if v.cs != nil && v.cs.Pool() == pool && (skip == nil || !skip(v)) {
			return v
		}
	}
	return nil
}

// poolStats adds up the pools' pages (in use by kind, free, total).
func (e *Engine) poolStats() (used map[string]int, free, total int) {
	used = map[string]int{}
	for _, p := range e.pools {
		for k, n := range p.UsedPages() {
			used[k] += n
		}
		free += p.FreePages()
		total += p.NumPages()
	}
	return used, free, total
}

// prefixPages is the pool pages the prefix snapshots hold beyond those of
// the live sequences, counted pool by pool (page ids are per pool).
func (e *Engine) prefixPages(live []*cache.Seq) int {
	if len(e.pools) == 1 {
		return e.prefix.pages(live)
	}
	n := 0
	for _, pool := range e.pools {
		var in []*cache.Seq
		for _, s := range live {
			if s.Pool() == pool {
				in = append(in, s)
			}
		}
		all := slices.Clone(in)
		for el := e.prefix.lru.Front(); el != nil; el = el.Next() {
			if s := el.Value.(*snapshot).seq; s.Pool() == pool {
				all = append(all, s)
			}
		}
		n += cache.DistinctPages(all...) - cache.DistinctPages(in...)
	}
	return n
}
