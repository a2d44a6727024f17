package moe

import (
	"fmt"
	"slices"
)

// Balance places experts with the expected load load[e] (tokens per step,
// or any unit) on ranks ranks of slots expert slots each, replicating the
// busiest (DeepSeek's EPLB, its global form):
//
//   - replication: the slots·ranks − experts spare slots go, one at a
//     time, to the expert whose load per replica is highest (ties: the
//     lower id), at most one replica per rank;
//   - packing: the replicas, heaviest first (load over replicas; ties: the
//     lower expert id), each to the rank with the least load so far among
//     those with a free slot that do not hold the expert (ties: the lower
//     rank); when only ranks that hold it have room, an expert of a full
//     rank moves to one of them to make room.
//
// Every expert gets at least one replica and every rank exactly slots.
func Balance(load []float64, ranks, slots int) (*Placement, error) {
	E := len(load)
	if E == 0 || ranks <= 0 || slots <= 0 {
		return nil, fmt.Errorf("moe: balancing %d experts over %d ranks of %d slots", E, ranks, slots)
	}
	if ranks*slots < E {
		return nil, fmt.Errorf("moe: %d ranks of %d slots cannot hold %d experts", ranks, slots, E)
	}
	if ranks*slots > E*ranks {
		return nil, fmt.Errorf("moe: %d slots per rank for %d experts: a rank would hold an expert twice", slots, E)
	}
	for e, l := range load {
		if l < 0 || l != l {
			return nil, fmt.Errorf("moe: expert %d's load is %v", e, l)
		}
	}
	cnt := make([]int, E)
	for e := range cnt {
		cnt[e] = 1
	}
	for range ranks*slots - E {
		best := -1
		for e := range E {
			if cnt[e] == ranks {
				continue
			}
			if best < 0 || load[e]*float64(cnt[best]) > load[best]*float64(cnt[e]) {
				best = e
			}
		}
		cnt[best]++
	}
	type replica struct {
		e int
		w float64
	}
	var reps []replica
	for e := range E {
		for range cnt[e] {
			reps = append(reps, replica{e, load[e] / float64(cnt[e])})
		}
	}
	slices.SortStableFunc(reps, func(a, b replica) int {
		switch {
		case a.w > b.w:
			return -1
		case a.w < b.w:
			return 1
		}
		return a.e - b.e
	})
	held := make([][]bool, ranks) // held[r][e]
	for r := range held {
		held[r] = make([]bool, E)
	}
	used := make([]int, ranks)
	rload := make([]float64, ranks)
	for _, it := range reps {
		best := -1
		for r := range ranks {
			if used[r] == slots || held[r][it.e] {
				continue
			}
			if best < 0 || rload[r] < rload[best] {
				best = r
			}
		}
		if best < 0 {
			best = makeRoom(held, used, rload, load, cnt, slots, it.e)
		}
		held[best][it.e] = true
		used[best]++
		rload[best] += it.w
	}
	p := &Placement{Ranks: ranks, Replicas: make([][]int, E)}
	for e := range E {
		for r := range ranks {
			if held[r][e] {
				p.Replicas[e] = append(p.Replicas[e], r)
			}
		}
	}
	if err := p.Validate(E); err != nil {
		return nil, fmt.Errorf("moe: balance produced an invalid placement: %w", err)
	}
	return p, nil
}

// makeRoom handles a replica of e for which every rank with a free slot
// already holds e: some full rank b lacks e (e has fewer replicas placed
// than ranks), and b holds an expert f that a rank a with a free slot
// lacks (a holds fewer experts than b). f moves from b to a, and b is
// returned for e.
func makeRoom(held [][]bool, used []int, rload, load []float64, cnt []int, slots, e int) int {
	for a := range held {
		if used[a] == slots {
			continue
		}
		for b := range held {
			if used[b] < slots || held[b][e] {
				continue
			}
			for f := range held[b] {
				if held[b][f] && !held[a][f] {
					w := load[f] / float64(cnt[f])
					held[b][f], held[a][f] = false, true
					used[b]--
					used[a]++
					rload[b] -= w
					rload[a] += w
					return b
				}
			}
		}
	}
	panic("moe: no room for a replica (unreachable: Balance checked the slot counts)")
}

// HashLoad is the expected load of each expert of a hash-routed layer for
// the token frequencies freq (indexed by token id): expert e carries
// Σ_t freq[t] over the K entries of tid2eid's row t that name e. The
// routing depends on token ids alone, so the load follows from the text's
// token statistics without running the model; frequent tokens always go to
// the same experts, which no batch size evens out.
func HashLoad(tid2eid []int32, k int, freq []float64, experts int) ([]float64, error) {
	if k <= 0 || len(tid2eid)%k != 0 {
		return nil, fmt.Errorf("moe: a table of %d entries for %d experts per token", len(tid2eid), k)
	}
	V := len(tid2eid) / k
	if len(freq) > V {
		return nil, fmt.Errorf("moe: frequencies of %d tokens for a table of %d", len(freq), V)
	}
	out := make([]float64, experts)
	for t, f := range freq {
		for _, e := range tid2eid[t*k : (t+1)*k] {
			if e < 0 || int(e) >= experts {
				return nil, fmt.Errorf("moe: token %d routes to expert %d of %d", t, e, experts)
			}
			out[e] += f
		}
	}
	return out, nil
}
