package engine

import (
	"context"
	"slices"
	"sync"
	"testing"
)

// TestStatsDuringSpeculation reads the engine's counters, as a /metrics
// scrape does, from another goroutine all through a run with MTP
// speculation (whose drafting updates the step-cost model). Under -race it
// fails if any counter is written outside the engine's lock. The counters a
// scraper sees never go backwards, and the output equals plain decoding.
func TestStatsDuringSpeculation(t *testing.T) {
	m := loadModel(t, "../../models/strata-kjv")
	prompt := []int32{0, 100, 200, 300, 400, 500}
	run := func(sp Speculation, scrape bool) ([]int32, int64) {
		e, err := New(m, Config{MaxBatchTokens: 256, Pages: 400, EOS: -1, Speculation: sp})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go e.Run(ctx)
		s, err := e.Submit(ctx, Request{Prompt: prompt, MaxTokens: 40})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var maxSpec int64
		if scrape {
			wg.Go(func() {
				var last Stats
				for {
					select {
					case <-stop:
						return
					default:
					}
					st := e.Stats()
					if st.SpecSteps < last.SpecSteps || st.Steps < last.Steps || st.OutTokens < last.OutTokens {
						t.Errorf("counters went backwards: %+v after %+v", st, last)
						return
					}
					last, maxSpec = st, st.SpecSteps
				}
			})
		}
		toks, _ := collect(t, s)
		close(stop)
		wg.Wait()
		if scrape {
			maxSpec = max(maxSpec, e.Stats().SpecSteps)
		}
		return toks, maxSpec
	}
	want, _ := run(Speculation{}, false)
	got, spec := run(Speculation{Method: SpecMTP, MaxDraft: 3, Fixed: true}, true)
	if !slices.Equal(got, want) {
		t.Fatalf("with speculation %v, plain %v", got, want)
	}
	if spec == 0 {
		t.Fatal("no speculative step ran")
	}
}
