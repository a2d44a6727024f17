package engine

import (
	"context"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/model/deepseekv4"
)

// BenchmarkMultiTurn16K runs a 20-turn conversation on the shipped model
// through the prefix cache: each turn sends the whole conversation so far
// plus 800 new tokens and generates 16, up to a 16K-token context. It
// reports the median time to first token of turns 2..20 (a prefix hit
// restores the previous turn's state and computes only the new tokens),
// the prompt tokens restored from snapshots, and the most pool pages held
// at once (the live request and the snapshots).
func BenchmarkMultiTurn16K(b *testing.B) {
	m, err := deepseekv4.Load(caseDir("../../models/strata-kjv"), cpu.New(0))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	const turns, user, reply = 20, 800, 16
	for range b.N {
		e, err := New(m, Config{MaxBatchTokens: 2048, Pages: 6000, EOS: -1})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go e.Run(ctx)
		r := rand.New(rand.NewPCG(1, 2))
		var conv []int32
		var ttft []float64
		peak := 0
		for turn := range turns {
			for range user {
				conv = append(conv, int32(1+r.IntN(m.VocabSize()-1)))
			}
			t0 := time.Now()
			s, err := e.Submit(ctx, Request{Prompt: conv, MaxTokens: reply, IgnoreEOS: true})
			if err != nil {
				b.Fatal(err)
			}
			first := true
			for {
				ev, err := s.Recv(ctx)
				if err != nil {
					break
				}
				if first {
					if turn > 0 {
						ttft = append(ttft, time.Since(t0).Seconds())
					}
					first = false
				}
				st := e.Stats()
				peak = max(peak, st.PagesTotal-st.PagesFree)
				if ev.Err == nil {
					conv = append(conv, ev.Token)
				}
				if ev.Finish != "" {
					break
				}
			}
		}
		st := e.Stats()
		cancel()
		sort.Float64s(ttft)
		b.ReportMetric(ttft[len(ttft)/2]*1e3, "ms-ttft-p50")
		b.ReportMetric(float64(st.PrefixHitTokens), "hit-tokens")
		b.ReportMetric(float64(peak), "peak-pages")
		b.ReportMetric(float64(len(conv)), "context")
	}
}
