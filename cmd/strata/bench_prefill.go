package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/model"
)

// runBenchPrefill measures prefill speed on any checkpoint: one sequence,
// a prompt of -prompt tokens fed in chunks of -chunk, median of -reps.
func runBenchPrefill(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench prefill", flag.ContinueOnError)
	dir := fs.String("model", defaultModel, "model folder (any checkpoint; prompts from its golden data if it has some)")
	promptLen := fs.Int("prompt", 512, "prompt tokens")
	chunk := fs.Int("chunk", 0, "tokens per forward pass (0: the whole prompt in one)")
	reps := fs.Int("reps", 3, "repetitions (the median is reported)")
	threads := fs.Int("threads", 0, "compute goroutines (0: one per CPU)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *promptLen < 1 || *reps < 1 {
		return fmt.Errorf("-prompt %d and -reps %d: want at least 1", *promptLen, *reps)
	}
	m, err := loadModel(*dir, cpu.New(*threads), model.Options{})
	if err != nil {
		return err
	}
	defer m.Close()
	if p, ok := m.(model.Prefaulter); ok {
		if err := p.Prefault(ctx); err != nil {
			return err
		}
	}
	prompts, err := benchPrompts(*dir, 1, *promptLen)
	if err != nil {
		return err
	}
	ids := prompts[0]
	step := *chunk
	if step <= 0 {
		step = len(ids)
	}
	pool, err := cache.PoolFor(m.Backend(), m.CacheSpecs(), len(ids), 1)
	if err != nil {
		return err
	}
	defer pool.Close()
	var times []time.Duration
	for r := range *reps + 1 { // the first run warms caches and the scratch
		seq, err := m.NewSeq(pool)
		if err != nil {
			return err
		}
		t0 := time.Now()
		for p := 0; p < len(ids); p += step {
			n := min(step, len(ids)-p)
			lg := model.NoLogits
			if p+n == len(ids) {
				lg = model.LastLogits
			}
			b := &model.Batch{Tokens: ids[p : p+n], Spans: []model.Span{{Seq: seq, Len: n, Logits: lg}}}
			if _, err := m.Forward(ctx, b); err != nil {
				seq.Release()
				return err
			}
		}
		dt := time.Since(t0)
		seq.Release()
		if r > 0 {
			times = append(times, dt)
		}
	}
	slices.Sort(times)
	med := times[len(times)/2]
	tps := float64(len(ids)) / med.Seconds()
	fmt.Fprintf(stdout, "model %s, %s, %d CPUs: prefill of %d tokens in chunks of %d: %.1f tokens/s (median of %d: %v)\n",
		*dir, m.Backend().Name(), runtime.GOMAXPROCS(0), len(ids), step, tps, *reps, med.Round(time.Millisecond))
	if f, ok := m.(model.PrefillCounter); ok {
		fl := f.PrefillFLOPs(len(ids))
		fmt.Fprintf(stdout, "arithmetic %.1f GFLOP: %.1f GFLOP/s\n", fl/1e9, fl/med.Seconds()/1e9)
	}
	return nil
}
