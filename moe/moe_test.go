package moe

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestBlock(t *testing.T) {
	p, err := Block(8, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(8); err != nil {
		t.Fatal(err)
	}
	want := [][]int{{0, 1}, {2, 3, 4}, {5, 6, 7}}
	for r := range 3 {
		if fmt.Sprint(p.Experts(r)) != fmt.Sprint(want[r]) {
			t.Errorf("rank %d holds %v, want %v", r, p.Experts(r), want[r])
		}
	}
	if _, err := Block(2, 3); err == nil {
		t.Error("3 ranks for 2 experts: no error")
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		p    Placement
		want string
	}{
		{Placement{Ranks: 2, Replicas: [][]int{{0}, {}}}, "expert 1 is on no rank"},
		{Placement{Ranks: 2, Replicas: [][]int{{0}, {2}}}, "on rank 2 of 2"},
		{Placement{Ranks: 2, Replicas: [][]int{{1, 0}, {1}}}, "not ascending"},
		{Placement{Ranks: 3, Replicas: [][]int{{0}, {1}}}, "rank 2 holds no expert"},
	} {
		if err := tc.p.Validate(2); err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.p.Replicas, err, tc.want)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// checkShape: every rank holds exactly slots experts, every expert at
// least one replica.
func checkShape(t *testing.T, p *Placement, E, ranks, slots int) {
	t.Helper()
	if err := p.Validate(E); err != nil {
		t.Fatal(err)
	}
	for r, n := range p.PerRank() {
		if n != slots {
			t.Fatalf("rank %d holds %d experts, want %d", r, n, slots)
		}
	}
}

// optimum is the least possible busiest-rank load over every placement of
// E experts on ranks ranks of slots slots (each expert's load split evenly
// over its replicas), by enumeration.
func optimum(load []float64, ranks, slots int) float64 {
	E := len(load)
	var subsets []uint
	for m := uint(0); m < 1<<E; m++ {
		if popcount(m) == slots {
			subsets = append(subsets, m)
		}
	}
	best := math.Inf(1)
	choice := make([]uint, ranks)
	var rec func(r int)
	rec = func(r int) {
		if r == ranks {
			var cover uint
			cnt := make([]int, E)
			for _, m := range choice {
				cover |= m
				for e := range E {
					if m>>e&1 == 1 {
						cnt[e]++
					}
				}
			}
			if cover != 1<<E-1 {
				return
			}
			top := 0.0
			for _, m := range choice {
				s := 0.0
				for e := range E {
					if m>>e&1 == 1 {
						s += load[e] / float64(cnt[e])
					}
				}
				top = max(top, s)
			}
			best = min(best, top)
			return
		}
		for _, m := range subsets {
			choice[r] = m
			rec(r + 1)
		}
	}
	rec(0)
	return best
}

func popcount(m uint) int {
	n := 0
	for ; m != 0; m &= m - 1 {
		n++
	}
	return n
}

// TestBalanceAgainstOptimum compares Balance with the best placement found
// by enumeration on small random skewed instances: always valid, never
// more than 4/3 of the optimum's busiest rank, and usually at it.
func TestBalanceAgainstOptimum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	worst, atOpt, n := 0.0, 0, 0
	for _, sh := range []struct{ E, ranks, slots int }{{4, 2, 3}, {5, 2, 3}, {5, 3, 2}, {6, 3, 3}, {7, 2, 4}, {6, 2, 3}} {
		for range 30 {
			load := make([]float64, sh.E)
			for e := range load {
				load[e] = math.Floor(math.Exp(3*rng.Float64()*rng.Float64()) * 10) // skewed
			}
			p, err := Balance(load, sh.ranks, sh.slots)
			if err != nil {
				t.Fatal(err)
			}
			checkShape(t, p, sh.E, sh.ranks, sh.slots)
			got := 0.0
			for _, v := range p.RankLoads(load) {
				got = max(got, v)
			}
			opt := optimum(load, sh.ranks, sh.slots)
			r := got / opt
			worst = max(worst, r)
			if r <= 1+1e-12 {
				atOpt++
			}
			n++
			if r > 4.0/3+1e-12 {
				t.Errorf("%+v load %v: busiest rank %.3g, optimum %.3g (%.3f×)", sh, load, got, opt, r)
			}
		}
	}
	t.Logf("%d instances: %d at the optimum, worst %.3f× the optimum", n, atOpt, worst)
	if atOpt < n/2 {
		t.Errorf("only %d of %d instances at the optimum", atOpt, n)
	}
}

// TestBalanceValidRandom: valid placements (the repair path included) over
// many random shapes and loads, zero loads and ties among them.
func TestBalanceValidRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		E := 1 + rng.IntN(12)
		ranks := 1 + rng.IntN(5)
		minSlots := (E + ranks - 1) / ranks
		slots := minSlots + rng.IntN(E-minSlots+1)
		load := make([]float64, E)
		for e := range load {
			load[e] = float64(rng.IntN(4)) // many ties and zeros
		}
		p, err := Balance(load, ranks, slots)
		if err != nil {
			t.Fatalf("E=%d ranks=%d slots=%d: %v", E, ranks, slots, err)
		}
		checkShape(t, p, E, ranks, slots)
	}
}

// zipfTraffic is the handbook's setting: DeepSeek-V4-Flash's vocabulary,
// 256 experts, 6 per token, a random hash table, and token frequencies
// following a Zipf law with exponent 1.1.
func zipfTraffic() (tab []int32, freq []float64) {
	const V, E, K = 129280, 256, 6
	rng := rand.New(rand.NewPCG(0, 0))
	tab = make([]int32, V*K)
	perm := make([]int32, E)
	for i := range perm {
		perm[i] = int32(i)
	}
	for t := range V {
		for i := range K { // partial Fisher-Yates: K distinct experts
			j := i + rng.IntN(E-i)
			perm[i], perm[j] = perm[j], perm[i]
			tab[t*K+i] = perm[i]
		}
	}
	freq = make([]float64, V)
	var sum float64
	for t := range freq {
		freq[t] = math.Pow(float64(t+1), -1.1)
		sum += freq[t]
	}
	for t := range freq {
		freq[t] /= sum
	}
	return tab, freq
}

// TestHashLoadSkewedTraffic: under Zipf traffic a hash layer's busiest
// expert carries several times the mean (the handbook measures 7-8× on
// sampled batches), and with contiguous blocks on 8 ranks the busiest
// rank is well above the mean; replicating by the token-frequency load
// (4 spare slots per rank, 1/8 more expert memory) brings it close to
// even.
func TestHashLoadSkewedTraffic(t *testing.T) {
	tab, freq := zipfTraffic()
	load, err := HashLoad(tab, 6, freq, 256)
	if err != nil {
		t.Fatal(err)
	}
	var sum, top float64
	for _, l := range load {
		sum += l
		top = max(top, l)
	}
	expertSkew := top / (sum / 256)
	blocks, _ := Block(256, 8)
	bal, err := Balance(load, 8, 36)
	if err != nil {
		t.Fatal(err)
	}
	checkShape(t, bal, 256, 8, 36)
	before, after := blocks.Imbalance(load), bal.Imbalance(load)
	t.Logf("busiest expert %.2f× the mean; busiest of 8 ranks: %.3f× the mean in blocks, %.3f× balanced", expertSkew, before, after)
	if expertSkew < 4 {
		t.Errorf("busiest expert only %.2f× the mean: the traffic is not skewed", expertSkew)
	}
	if before < 1.2 {
		t.Errorf("blocks already nearly even (%.3f×)", before)
	}
	if after > 1.02 {
		t.Errorf("balanced placement leaves the busiest rank at %.3f× the mean", after)
	}
	// The hottest expert got replicas.
	hot := 0
	for e := range load {
		if load[e] > load[hot] {
			hot = e
		}
	}
	if len(bal.Replicas[hot]) < 2 {
		t.Errorf("the hottest expert (%.2f× the mean) has %d replica(s)", load[hot]/(sum/256), len(bal.Replicas[hot]))
	}
}

// TestHashLoadCounts: for a batch's token counts as frequencies, HashLoad
// is the count of (token, k) entries per expert of the batch's rows.
func TestHashLoadCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	const V, E, K = 50, 7, 3
	tab := make([]int32, V*K)
	for i := range tab {
		tab[i] = int32(rng.IntN(E))
	}
	freq := make([]float64, V)
	want := make([]float64, E)
	for range 300 {
		tok := rng.IntN(V)
		freq[tok]++
		for _, e := range tab[tok*K : (tok+1)*K] {
			want[e]++
		}
	}
	got, err := HashLoad(tab, K, freq, E)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("HashLoad %v, counted %v", got, want)
	}
	if _, err := HashLoad(tab, K, freq, 3); err == nil {
		t.Error("experts beyond the count: no error")
	}
}

// TestAssigner: pairs of a replicated expert alternate between replicas,
// the home rank first on ties; the others' ties go in cyclic order from
// home; unreplicated experts always go to their rank.
func TestAssigner(t *testing.T) {
	p := &Placement{Ranks: 4, Replicas: [][]int{{0, 2, 3}, {1}, {1, 2}}}
	a := p.NewAssigner(2)
	var got []int
	for _, e := range []int{0, 0, 0, 0, 1, 2, 2, 2} {
		got = append(got, a.Assign(e))
	}
	// Expert 0 on {0, 2, 3} from home 2: 2 (home), then 3 (next after 2),
	// then 0, then 2 again. Expert 1: rank 1. Expert 2 on {1, 2}: rank 2
	// has 2 pairs and rank 1 has 1 (expert 1's): 1, then 1 and 2 tie at
	// 2 → home 2, then 1.
	want := []int{2, 3, 0, 2, 1, 1, 2, 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("assigned %v, want %v", got, want)
	}
}

// TestMakeRoom: when every rank with a free slot already holds the expert
// to place, an expert of a full rank moves to a free slot and the full
// rank takes the replica (Balance's ordering makes this rare: replicated
// experts are the heaviest per replica and are placed first).
func TestMakeRoom(t *testing.T) {
	// Rank 0 holds {0} and has a free slot; rank 1 is full with {1, 2}.
	// A second replica of expert 0 cannot go to rank 0.
	held := [][]bool{{true, false, false}, {false, true, true}}
	used := []int{1, 2}
	load := []float64{4, 2, 1}
	cnt := []int{2, 1, 1}
	rload := []float64{2, 3}
	b := makeRoom(held, used, rload, load, cnt, 2, 0)
	if b != 1 {
		t.Fatalf("room made on rank %d, want 1", b)
	}
	if !held[0][1] || held[1][1] || used[0] != 2 || used[1] != 1 || rload[0] != 4 || rload[1] != 1 {
		t.Errorf("after the move: held %v, used %v, loads %v", held, used, rload)
	}
}
