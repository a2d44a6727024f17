package deepseekv4

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/model"
)

// BenchmarkParallelDecode times decode steps of the synthetic checkpoint
// (BenchmarkDecodeStep's: hidden 2048, 64 FP4 experts of 1024, 6 per token,
// 8 layers) at context 512 on one device and on 2 and 3 in-process CPU
// ranks with one compute goroutine each, the batch's sequences spread over
// the ranks. Beside tokens/s it reports, per step, the time the busiest
// rank spent in exchanges (counts, dispatch, combine, waiting for the
// other ranks included: comm-ms), in its experts on the rows it received
// (expert-ms), and the rows and bytes that crossed ranks.
func BenchmarkParallelDecode(b *testing.B) {
	if testing.Short() {
		b.Skip("writes a 1.7 GB checkpoint")
	}
	dir := syntheticDir(b)
	const ctxLen = 512
	for _, batch := range []int{1, 8} {
		for _, n := range []int{1, 2, 3} {
			b.Run(fmt.Sprintf("batch=%d/ranks=%d", batch, n), func(b *testing.B) {
				var m model.Model
				var p *Parallel
				if n == 1 {
					one, err := Load(dir, cpu.New(2))
					if err != nil {
						b.Fatal(err)
					}
					defer one.Close()
					m = one
				} else {
					p = loadParallel(b, dir, n, nil)
					m = p
				}
				if err := m.(model.Prefaulter).Prefault(context.Background()); err != nil {
					b.Fatal(err)
				}
				pools := benchPools(b, m, p, ctxLen+b.N+2, batch)
				st := &model.Batch{}
				for i := range batch {
					seq, err := m.NewSeq(pools[i%len(pools)])
					if err != nil {
						b.Fatal(err)
					}
					fillContext(b, seq, ctxLen)
					st.Spans = append(st.Spans, model.Span{Seq: seq, Start: i, Len: 1, Logits: model.LastLogits})
					st.Tokens = append(st.Tokens, int32(i))
				}
				r := rand.New(rand.NewPCG(3, 4))
				step := func() {
					for i := range st.Tokens {
						st.Tokens[i] = int32(r.IntN(m.VocabSize()))
					}
					if _, err := m.Forward(context.Background(), st); err != nil {
						b.Fatal(err)
					}
				}
				step() // warm
				var before []EPStats
				if p != nil {
					before = p.Stats()
				}
				b.ResetTimer()
				for range b.N {
					step()
				}
				b.StopTimer()
				perStep := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(float64(batch)/perStep, "tokens/s")
				b.ReportMetric(perStep*1e3, "ms/step")
				if p != nil {
					reportEP(b, p, before, b.N)
				}
			})
		}
	}
}

// BenchmarkParallelPrefill times the prefill of two 128-token prompts in
// one step, on one device and with each prompt on its own rank of 2.
func BenchmarkParallelPrefill(b *testing.B) {
	if testing.Short() {
		b.Skip("writes a 1.7 GB checkpoint")
	}
	dir := syntheticDir(b)
	const n, seqs = 128, 2
	for _, ranks := range []int{1, 2} {
		b.Run(fmt.Sprintf("ranks=%d", ranks), func(b *testing.B) {
			var m model.Model
			var p *Parallel
			if ranks == 1 {
				one, err := Load(dir, cpu.New(2))
				if err != nil {
					b.Fatal(err)
				}
				defer one.Close()
				m = one
			} else {
				p = loadParallel(b, dir, ranks, nil)
				m = p
			}
			if err := m.(model.Prefaulter).Prefault(context.Background()); err != nil {
				b.Fatal(err)
			}
			pools := benchPools(b, m, p, n, seqs)
			r := rand.New(rand.NewPCG(1, 2))
			toks := make([]int32, n*seqs)
			for i := range toks {
				toks[i] = int32(r.IntN(m.VocabSize()))
			}
			run := func() {
				batch := &model.Batch{Tokens: toks}
				for i := range seqs {
					seq, err := m.NewSeq(pools[i%len(pools)])
					if err != nil {
						b.Fatal(err)
					}
					defer seq.Release()
					batch.Spans = append(batch.Spans, model.Span{Seq: seq, Start: i * n, Len: n, Logits: model.LastLogits})
				}
				if _, err := m.Forward(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
			}
			run()
			var before []EPStats
			if p != nil {
				before = p.Stats()
			}
			b.ResetTimer()
			for range b.N {
				run()
			}
			b.StopTimer()
			b.ReportMetric(float64(n*seqs*b.N)/b.Elapsed().Seconds(), "tokens/s")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/step")
			if p != nil {
				reportEP(b, p, before, b.N)
			}
		})
	}
}

// benchPools makes a pool for seqs sequences of tokens tokens on every
// rank of p, or on m's backend when p is nil.
func benchPools(b *testing.B, m model.Model, p *Parallel, tokens, seqs int) []*cache.Pool {
	bes := []compute.Backend{m.Backend()}
	if p != nil {
		bes = p.RankBackends()
	}
	var pools []*cache.Pool
	for _, be := range bes {
		pool, err := cache.PoolFor(be, m.CacheSpecs(), tokens, seqs)
		if err != nil {
			b.Fatal(err)
		}
		pools = append(pools, pool)
	}
	return pools
}

// reportEP reports the busiest rank's exchange and expert time per step and
// the traffic between ranks since before.
func reportEP(b *testing.B, p *Parallel, before []EPStats, steps int) {
	var comm, expert float64
	var crossed int64
	for r, s := range p.Stats() {
		comm = max(comm, s.CommSeconds-before[r].CommSeconds)
		expert = max(expert, s.ExpertSeconds-before[r].ExpertSeconds)
		crossed += (s.RowsSent - s.RowsKept) - (before[r].RowsSent - before[r].RowsKept)
	}
	per := float64(steps)
	b.ReportMetric(comm/per*1e3, "comm-ms/step")
	b.ReportMetric(expert/per*1e3, "expert-ms/step")
	b.ReportMetric(float64(crossed)/per, "rows-crossed/step")
	// Each crossing row goes out (D floats and its expert id) and comes back.
	b.ReportMetric(float64(crossed)/per*float64(p.Cfg.Hidden*4*2+4)/1e6, "MB-crossed/step")
}
