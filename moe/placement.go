// Package moe holds the model-independent parts of expert parallelism:
// where a layer's routed experts live among the ranks (Placement), which
// replica computes each token's expert (Assigner), and the expert-parallel
// load balancer that replicates hot experts (Balance, after DeepSeek's
// EPLB), with the expected load of hash-routed layers computed from token
// frequencies alone (HashLoad).
package moe

import (
	"fmt"
	"slices"
)

// Placement is where one MoE layer's routed experts live among Ranks
// ranks: Replicas[e] lists the ranks holding expert e, ascending, at least
// one, each rank at most once. Every replica holds the same weights, and
// an expert's output for a token does not depend on which replica
// computes it.
type Placement struct {
	Ranks    int
	Replicas [][]int
}

// Block places experts experts on ranks ranks in contiguous blocks, one
// replica each: rank r holds experts [r·E/n, (r+1)·E/n) (integer division,
// so the blocks differ in size by one at most).
func Block(experts, ranks int) (*Placement, error) {
	if experts <= 0 || ranks <= 0 {
		return nil, fmt.Errorf("moe: %d experts on %d ranks", experts, ranks)
	}
	if ranks > experts {
		return nil, fmt.Errorf("moe: %d ranks for %d experts: some rank would hold none (replicate with Balance)", ranks, experts)
	}
	p := &Placement{Ranks: ranks, Replicas: make([][]int, experts)}
	for r := range ranks {
		for e := r * experts / ranks; e < (r+1)*experts/ranks; e++ {
			p.Replicas[e] = []int{r}
		}
	}
	return p, nil
}

// Validate checks that p places exactly experts experts, each on at least
// one rank in range, ascending and without repeats, and that every rank
// holds at least one.
func (p *Placement) Validate(experts int) error {
	if p == nil {
		return fmt.Errorf("moe: no placement")
	}
	if p.Ranks <= 0 {
		return fmt.Errorf("moe: placement over %d ranks", p.Ranks)
	}
	if len(p.Replicas) != experts {
		return fmt.Errorf("moe: placement of %d experts, want %d", len(p.Replicas), experts)
	}
	held := make([]int, p.Ranks)
	for e, rs := range p.Replicas {
		if len(rs) == 0 {
			return fmt.Errorf("moe: expert %d is on no rank", e)
		}
		for i, r := range rs {
			if r < 0 || r >= p.Ranks {
				return fmt.Errorf("moe: expert %d is on rank %d of %d", e, r, p.Ranks)
			}
			if i > 0 && r <= rs[i-1] {
				return fmt.Errorf("moe: expert %d's ranks %v are not ascending and distinct", e, rs)
			}
			held[r]++
		}
	}
	for r, n := range held {
		if n == 0 {
			return fmt.Errorf("moe: rank %d holds no expert", r)
		}
	}
	return nil
}

// Holds reports whether rank holds expert e.
func (p *Placement) Holds(rank, e int) bool {
	_, ok := slices.BinarySearch(p.Replicas[e], rank)
	return ok
}

// Experts lists the experts rank holds, ascending.
func (p *Placement) Experts(rank int) []int {
	var out []int
	for e := range p.Replicas {
		if p.Holds(rank, e) {
			out = append(out, e)
		}
	}
	return out
}

// PerRank is how many experts each rank holds.
func (p *Placement) PerRank() []int {
	n := make([]int, p.Ranks)
	for _, rs := range p.Replicas {
		for _, r := range rs {
			n[r]++
		}
	}
	return n
}

// RankLoads is each rank's expected load when every expert's load is
// split evenly over its replicas (what Assigner approaches).
func (p *Placement) RankLoads(load []float64) []float64 {
	out := make([]float64, p.Ranks)
	for e, rs := range p.Replicas {
		for _, r := range rs {
			out[r] += load[e] / float64(len(rs))
		}
	}
	return out
}

// Imbalance is the busiest rank's expected load over the mean (1: even).
func (p *Placement) Imbalance(load []float64) float64 {
	rl := p.RankLoads(load)
	var sum, top float64
	for _, v := range rl {
		sum += v
		top = max(top, v)
	}
	if sum == 0 {
		return 1
	}
	return top / (sum / float64(len(rl)))
}

// Assigner picks the replica that computes each of one rank's (token,
// expert) pairs in one layer: the replica this rank has given the fewest
// pairs so far, ties going to the rank itself (no transfer), then to the
// ranks after it in cyclic order (so that ranks with the same traffic do
// not all pick the same replica). It depends only on the sequence of
// experts asked for: the dispatch is deterministic.
type Assigner struct {
	p    *Placement
	home int
	sent []int
}

// NewAssigner starts the assignment of rank home's pairs of one layer.
func (p *Placement) NewAssigner(home int) *Assigner {
	return &Assigner{p: p, home: home, sent: make([]int, p.Ranks)}
}

// Assign returns the rank that computes expert e for the next pair.
func (a *Assigner) Assign(e int) int {
	rs := a.p.Replicas[e]
	best := rs[0]
	if len(rs) > 1 {
		n := a.p.Ranks
		dist := func(r int) int { return (r - a.home + n) % n }
		for _, r := range rs[1:] {
			if a.sent[r] < a.sent[best] || a.sent[r] == a.sent[best] && dist(r) < dist(best) {
				best = r
			}
		}
	}
	a.sent[best]++
	return best
}
