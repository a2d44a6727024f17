package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model/deepseekv4"
	"github.com/strata-inference/strata/plan"
)

func caseDir(name string) string { return filepath.Join("..", "testdata", "golden", name) }

func loadModel(t *testing.T, name string) *deepseekv4.Model {
	t.Helper()
	m, err := deepseekv4.Load(caseDir(name), cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// drain steps e until it is idle.
func drain(t *testing.T, e *Engine) {
	t.Helper()
	for i := 0; !e.Idle(); i++ {
		if _, err := e.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		if i > 100000 {
			t.Fatal("engine does not finish")
		}
	}
}

func collect(t *testing.T, s *Stream) ([]int32, Event) {
	t.Helper()
	toks, last, err := s.Collect(context.Background())
	if err != nil {
		t.Fatalf("request %d: %v", s.ID, err)
	}
	return toks, last
}

func capture(m map[int][]float32) func(int, []float32) {
	return func(p int, l []float32) { m[p] = slices.Clone(l) }
}

// TestBatchedGolden runs each golden case's decode and chunked paths and its
// greedy continuation as concurrent requests of different lengths, arriving
// at different steps, sharing batches under a small token budget and a pool
// too small for all of them (so some are preempted and recomputed), and
// checks every request against the single-sequence reference.
func TestBatchedGolden(t *testing.T) {
	cases := []string{"deepseek-v4/tiny", "deepseek-v4/flash-ratios", "deepseek-v4/quantized", "deepseek-v4-extra/hc3-csa8", "deepseek-v4-extra/hca12-groups4", "deepseek-v4-extra/quantized-hca20", "../../models/strata-kjv"}
	if raceDetector {
		cases = []string{"deepseek-v4/tiny", "deepseek-v4-extra/hc3-csa8", "../../models/strata-kjv"}
	}
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			m := loadModel(t, name)
			c, err := golden.Load(caseDir(name))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := CheckBatched(context.Background(), m, c, BatchedOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Requests {
				t.Logf("%s", r)
				if !r.OK() {
					t.Errorf("%s", r)
				}
			}
			if rep.Preemptions == 0 {
				t.Errorf("no preemption happened (pool of %d pages)", rep.PoolPages)
			}
			if rep.MaxBatchSeqs < 2 {
				t.Errorf("requests never shared a batch")
			}
			if rep.PagesLeft != 0 {
				t.Errorf("%d pages still held after all requests finished", rep.PagesLeft)
			}
		})
	}
}

// smallEngine makes an engine on the tiny case with a pool of pages pages.
func smallEngine(t *testing.T, m *deepseekv4.Model, pages, budget int) *Engine {
	t.Helper()
	e, err := New(m, Config{MaxBatchTokens: budget, MaxSeqs: 16, PageBytes: 512, Pages: pages, EOS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func prompt(n, seed, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((i*7 + seed*13 + 3) % vocab)
	}
	return p
}

// TestPreemptedOutputUnchanged samples a request alone, then again while
// others arrive before it finishes in a pool that forces its preemption,
// and requires the same tokens.
func TestPreemptedOutputUnchanged(t *testing.T) {
	m := loadModel(t, "deepseek-v4/tiny")
	sp := Sampling{Temperature: 0.9, TopP: 0.95, TopK: 50, Seed: 42}
	req := Request{Prompt: prompt(30, 1, m.VocabSize()), MaxTokens: 40, Sampling: sp}

	alone := smallEngine(t, m, 1000, 64)
	s, err := alone.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, alone)
	want, _ := collect(t, s)

	// Room for one request at full length and another's first chunk.
	e := smallEngine(t, m, alone.PagesFor(70)+alone.PagesFor(16), 16)
	first, err := e.Submit(context.Background(), Request{Prompt: prompt(20, 2, m.VocabSize()), MaxTokens: 45, Sampling: Sampling{Temperature: 1, Seed: 7}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e.Step(context.Background())
	}
	s, err = e.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, e)
	got, _ := collect(t, s)
	collect(t, first)
	if e.Stats().Preemptions == 0 {
		t.Fatal("no preemption happened")
	}
	if !slices.Equal(got, want) {
		t.Fatalf("preempted request gave %v, alone %v", got, want)
	}
}

// TestCancelReturnsPages cancels requests while queued and while running and
// checks the pool gets every page back.
func TestCancelReturnsPages(t *testing.T) {
	m := loadModel(t, "deepseek-v4/tiny")
	e := smallEngine(t, m, 2000, 32)
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	a, _ := e.Submit(ctxA, Request{Prompt: prompt(50, 1, m.VocabSize()), MaxTokens: 100})
	b, _ := e.Submit(ctxB, Request{Prompt: prompt(10, 2, m.VocabSize()), MaxTokens: 100})
	for range 4 {
		e.Step(context.Background())
	}
	if used := e.Pool().NumPages() - e.Pool().FreePages(); used == 0 {
		t.Fatal("no pages in use while running")
	}
	cancelA()
	e.Step(context.Background())
	held := e.Pool().NumPages() - e.Pool().FreePages()
	bs := e.Stats()
	if bs.Running != 1 {
		t.Fatalf("%d running after cancelling one of two", bs.Running)
	}
	cancelB()
	e.Step(context.Background())
	if free, cached := e.Pool().FreePages(), e.Stats().PrefixPages; free+cached != e.Pool().NumPages() {
		t.Fatalf("%d of %d pages free and %d held by prefix snapshots after cancelling everything", free, e.Pool().NumPages(), cached)
	}
	if held == 0 {
		t.Fatal("the remaining request held no pages")
	}
	for _, s := range []*Stream{a, b} {
		_, last, err := s.Collect(context.Background())
		if last.Finish != FinishCancelled || err == nil {
			t.Fatalf("request %d finished %q (%v), want cancelled", s.ID, last.Finish, err)
		}
	}
	// A request cancelled before it is ever admitted.
	ctxC, cancelC := context.WithCancel(context.Background())
	cancelC()
	c, _ := e.Submit(ctxC, Request{Prompt: prompt(5, 3, m.VocabSize()), MaxTokens: 3})
	drain(t, e)
	if _, last, _ := c.Collect(context.Background()); last.Finish != FinishCancelled {
		t.Fatalf("pre-cancelled request finished %q", last.Finish)
	}
}

// TestSmallPoolArrivalOrder: a pool that holds one request at a time; all
// requests complete, in order of arrival, and the pool ends empty.
func TestSmallPoolArrivalOrder(t *testing.T) {
	m := loadModel(t, "deepseek-v4/tiny")
	probe := smallEngine(t, m, 10, 8)
	e := smallEngine(t, m, probe.PagesFor(60)+1, 8)
	var streams []*Stream
	for i := range 5 {
		s, err := e.Submit(context.Background(), Request{Prompt: prompt(30+i, i, m.VocabSize()), MaxTokens: 25})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	var order []uint64
	for !e.Idle() {
		e.Step(context.Background())
		for _, s := range streams {
			s.mu.Lock()
			done := s.closed
			s.mu.Unlock()
			if done && !slices.Contains(order, s.ID) {
				order = append(order, s.ID)
			}
		}
	}
	for i, s := range streams {
		toks, last := collect(t, s)
		if len(toks) != 25 || last.Finish != FinishLength {
			t.Fatalf("request %d: %d tokens, finish %q", i, len(toks), last.Finish)
		}
	}
	if !slices.IsSorted(order) || len(order) != 5 {
		t.Fatalf("completion order %v, want arrival order", order)
	}
	if e.Pool().FreePages()+e.Stats().PrefixPages != e.Pool().NumPages() {
		t.Fatalf("pool not empty at the end but for prefix snapshots")
	}
}

// TestSeedAcrossBatches: a seeded sampled request gives the same tokens alone
// and in batches of different compositions.
func TestSeedAcrossBatches(t *testing.T) {
	m := loadModel(t, "deepseek-v4/tiny")
	req := Request{Prompt: prompt(25, 9, m.VocabSize()), MaxTokens: 30, Sampling: Sampling{Temperature: 1.2, MinP: 0.02, RepetitionPenalty: 1.1, PresencePenalty: 0.3, FrequencyPenalty: 0.2, Seed: 1234}}
	run := func(others int) []int32 {
		e := smallEngine(t, m, 4000, 40)
		for i := range others {
			e.Submit(context.Background(), Request{Prompt: prompt(10+7*i, 20+i, m.VocabSize()), MaxTokens: 5 + 3*i, Sampling: Sampling{Temperature: 1, Seed: uint64(i + 1)}})
			if i == 1 {
				e.Step(context.Background())
			}
		}
		s, _ := e.Submit(context.Background(), req)
		drain(t, e)
		toks, _ := collect(t, s)
		return toks
	}
	want := run(0)
	for _, n := range []int{1, 3, 6} {
		if got := run(n); !slices.Equal(got, want) {
			t.Fatalf("with %d other requests: %v, alone %v", n, got, want)
		}
	}
}

// TestPagesMatchPlan: the pages the engine holds for a request equal what the
// capacity planner predicts for the same config and cache dtype.
func TestPagesMatchPlan(t *testing.T) {
	for _, name := range []string{"deepseek-v4/flash-ratios", "deepseek-v4/tiny"} {
		m := loadModel(t, name)
		pm, err := plan.FromDeepSeekV4Config(filepath.Join(caseDir(name), "config.json"), cache.F32)
		if err != nil {
			t.Fatal(err)
		}
		const pageBytes = 8192
		for _, n := range []int{1, 3, 127, 128, 129, 300, 513} {
			e, err := New(m, Config{MaxBatchTokens: 1024, PageBytes: pageBytes, Pages: 4000, EOS: -1})
			if err != nil {
				t.Fatal(err)
			}
			// A prompt of n tokens: after prefill the engine holds the
			// pages of n tokens of context, then emits one token.
			var held int
			e.Submit(context.Background(), Request{Prompt: prompt(n, 1, m.VocabSize()), MaxTokens: 2, OnLogits: func(pos int, _ []float32) {
				if pos == n-1 { // the request's own pages, not its prefix snapshots
					held = e.Pool().NumPages() - e.Pool().FreePages() - e.prefix.pages(e.liveSeqs())
				}
			}})
			drain(t, e)
			if want := pm.Pages(n, pageBytes); held != want {
				t.Errorf("%s at %d tokens: engine holds %d pages, plan predicts %d", name, n, held, want)
			}
		}
	}
}

func TestSubmitRejects(t *testing.T) {
	m := loadModel(t, "deepseek-v4/tiny")
	e := smallEngine(t, m, 20, 8)
	V := m.VocabSize()
	for _, tc := range []struct {
		r    Request
		want string
	}{
		{Request{MaxTokens: 1}, "empty prompt"},
		{Request{Prompt: []int32{1}, MaxTokens: 0}, "max tokens 0"},
		{Request{Prompt: []int32{int32(V)}, MaxTokens: 1}, "outside the vocabulary"},
		{Request{Prompt: []int32{-1}, MaxTokens: 1}, "outside the vocabulary"},
		{Request{Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{Temperature: -1}}, "temperature"},
		{Request{Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{TopP: 2}}, "top_p"},
		{Request{Prompt: prompt(5000, 1, V), MaxTokens: 1}, "cache pages; the pool has 20"},
	} {
		_, err := e.Submit(context.Background(), tc.r)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Submit(%v...): error %v, want %q", fmt.Sprint(tc.r.Prompt)[:min(10, len(fmt.Sprint(tc.r.Prompt)))], err, tc.want)
		}
	}
}

func loadFuzzModel() (*deepseekv4.Model, error) {
	return deepseekv4.Load(caseDir("deepseek-v4/tiny"), cpu.New(1))
}
