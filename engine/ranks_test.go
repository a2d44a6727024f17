package engine

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/comm"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model/deepseekv4"
)

// rankCases are every DeepSeek-V4 golden case and the shipped model.
var rankCases = []string{
	"deepseek-v4/tiny", "deepseek-v4/flash-ratios", "deepseek-v4/quantized",
	"deepseek-v4-extra/hca12-groups4", "deepseek-v4-extra/quantized-hca20", "deepseek-v4-extra/hc3-csa8",
	"shipped",
}

func rankDir(name string) string {
	if name == "shipped" {
		return filepath.Join("..", "models", "strata-kjv")
	}
	return caseDir(name)
}

// parallelModel loads dir on n in-process CPU ranks.
func parallelModel(t *testing.T, dir string, n int) *deepseekv4.Parallel {
	t.Helper()
	bes := make([]compute.Backend, n)
	for r := range bes {
		bes[r] = cpu.New(1)
	}
	ends, err := comm.NewLocal(bes)
	if err != nil {
		t.Fatal(err)
	}
	cs := make([]comm.Comm, n)
	for r, c := range ends {
		cs[r] = c
	}
	p, err := deepseekv4.LoadParallel(dir, bes, cs, deepseekv4.ParallelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestRanksBitIdentical runs, for every golden case and the shipped model
// on 2 and 3 in-process CPU ranks, six decode requests (the reference ids
// forced one per step) and chunked prefills of several lengths and a
// greedy request through the engine: concurrent, arriving at different
// steps, under a small token budget, with pools so small that requests
// are preempted and recomputed, and the requests spread over the ranks'
// pools. Every logit row the engine hands out (recomputations included)
// must be the single-device full pass's row bit for bit, the greedy ids
// the single-device ones, and every pool must end empty.
func TestRanksBitIdentical(t *testing.T) {
	ctx := context.Background()
	for _, name := range rankCases {
		t.Run(name, func(t *testing.T) {
			dir := rankDir(name)
			one, err := deepseekv4.Load(dir, cpu.New(0))
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			c, err := golden.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			L, V := len(c.InputIDs), c.Vocab
			want, err := golden.Feed(ctx, one, c.InputIDs, []int{L})
			if err != nil {
				t.Fatal(err)
			}
			wantGreedy, err := golden.Greedy(ctx, one, c.InputIDs[:c.Prompt], len(c.Greedy))
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{2, 3} {
				p := parallelModel(t, dir, n)
				pageBytes := 0
				for _, s := range p.CacheSpecs() {
					pageBytes = max(pageBytes, s.SlotBytes)
				}
				pagesFor := func(k int) int { return cache.TotalPages(p.CacheSpecs(), k, pageBytes) }
				var reqs []Request
				// Two decodes per rank at least, which outgrow its pool.
				for _, k := range []int{L, L - L/10, L / 2, L - 3, L - L/5, 2 * L / 3} {
					pr := min(c.Prompt, k)
					reqs = append(reqs, Request{Prompt: c.InputIDs[:pr], Forced: c.InputIDs[pr:k], MaxTokens: k - pr + 1})
				}
				for _, k := range []int{L, L - L/7, L / 3} {
					reqs = append(reqs, Request{Prompt: c.InputIDs[:k], MaxTokens: 1})
				}
				reqs = append(reqs, Request{Prompt: c.InputIDs[:c.Prompt], MaxTokens: len(c.Greedy)})
				// Each rank's pool holds the largest request and a little more.
				e, err := New(p, Config{MaxBatchTokens: 37, MaxSeqs: 16, PageBytes: pageBytes, EOS: -1, Pages: pagesFor(L+1) + pagesFor(16)})
				if err != nil {
					t.Fatal(err)
				}
				if len(e.Pools()) != n {
					t.Fatalf("%d pools for %d ranks", len(e.Pools()), n)
				}
				rows := 0
				streams := make([]*Stream, len(reqs))
				submit := func(i int) {
					r := reqs[i]
					known := len(r.Prompt) + len(r.Forced) // positions whose inputs are the reference ids
					r.OnLogits = func(pos int, l []float32) {
						if pos >= known {
							return // the greedy request's own tokens
						}
						rows++
						for j := range l {
							if math.Float32bits(l[j]) != math.Float32bits(want[pos*V+j]) {
								t.Fatalf("%d ranks, request %d: logit %d at position %d is %g, one device %g", n, i, j, pos, l[j], want[pos*V+j])
							}
						}
					}
					s, err := e.Submit(ctx, r)
					if err != nil {
						t.Fatal(err)
					}
					streams[i] = s
				}
				next := 0
				for ; next < 3; next++ {
					submit(next)
				}
				for step := 0; next < len(reqs) || !e.Idle(); step++ {
					if step%2 == 1 && next < len(reqs) {
						submit(next)
						next++
					}
					if _, err := e.Step(ctx); err != nil {
						t.Fatal(err)
					}
				}
				for i, s := range streams {
					toks, last, err := s.Collect(ctx)
					if err != nil || last.Err != nil {
						t.Fatalf("request %d: %v %v", i, err, last.Err)
					}
					if i == len(reqs)-1 && !slices.Equal(toks, wantGreedy) {
						t.Errorf("%d ranks: greedy %v, one device %v", n, toks, wantGreedy)
					}
				}
				st := e.Stats()
				if st.Preemptions == 0 {
					t.Errorf("%d ranks: no preemption", n)
				}
				if st.PagesFree+st.PrefixPages != st.PagesTotal {
					t.Errorf("%d ranks: %d of %d pages free, %d in prefix snapshots", n, st.PagesFree, st.PagesTotal, st.PrefixPages)
				}
				for r, rs := range p.Stats() {
					if rs.RowsSent == 0 {
						t.Errorf("%d ranks: rank %d computed no token (%+v)", n, r, rs)
					}
				}
				t.Logf("%d ranks: %d logit rows, %d steps, %d preemptions", n, rows, st.Steps, st.Preemptions)
			}
		})
	}
}

// TestRanksSpeculation: greedy decoding with MTP speculation on 2 ranks
// (draft states on their requests' ranks, drafts verified and rolled back
// there) gives the single-device greedy ids.
func TestRanksSpeculation(t *testing.T) {
	ctx := context.Background()
	dir := rankDir("shipped")
	one, err := deepseekv4.Load(dir, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	c, err := golden.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	const out = 40
	p := parallelModel(t, dir, 2)
	e, err := New(p, Config{MaxBatchTokens: 64, MaxSeqs: 8, Pages: 64, EOS: -1,
		Speculation: Speculation{Method: SpecMTP, MaxDraft: 3, Fixed: true}})
	if err != nil {
		t.Fatal(err)
	}
	var streams []*Stream
	var want [][]int32
	for i, k := range []int{c.Prompt, c.Prompt / 2, c.Prompt - 3} {
		w, err := golden.Greedy(ctx, one, c.InputIDs[i:i+k], out)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, w)
		s, err := e.Submit(ctx, Request{Prompt: c.InputIDs[i : i+k], MaxTokens: out})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	drain(t, e)
	for i, s := range streams {
		got, _ := collect(t, s)
		if !slices.Equal(got, want[i]) {
			t.Errorf("request %d: %v, one device %v", i, got, want[i])
		}
	}
	st := e.Stats()
	if st.SpecDrafted == 0 || st.SpecAccepted == st.SpecDrafted {
		t.Errorf("drafted %d, accepted %d: want drafts, some rejected", st.SpecDrafted, st.SpecAccepted)
	}
	for r, rs := range p.Stats() {
		if rs.RowsSent == 0 {
			t.Errorf("rank %d computed no token", r)
		}
	}
	t.Logf("%d steps, %d drafted, %d accepted", st.Steps, st.SpecDrafted, st.SpecAccepted)

}
