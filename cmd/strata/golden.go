package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

func runCheckGolden(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("check-golden", flag.ContinueOnError)
	threads := fs.Int("threads", 0, "compute goroutines (0: one per CPU)")
	device := deviceFlag(fs)
	batched := fs.Bool("batched", false, "run the decode and chunked paths and the greedy continuation as concurrent requests through the scheduler, with a pool small enough to force preemption")
	budget := fs.Int("budget", 37, "with -batched: per-step token budget")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: strata check-golden [flags] DIR...

Runs each reference case DIR (config.json, model.safetensors or shards,
golden.safetensors, golden.json) along every path: one full pass, prompt
prefill then one-token decode, chunked prefill, and the greedy continuation.
Prints the max abs logit difference of each path and whether the greedy ids
match; exits 0 only if every path is within the case's tolerance (golden.json's
"tolerance", %g where it gives none) and greedy matches exactly. Any registered
architecture (chosen by config.json's model_type) is checked the same way.

With -batched, the decode and chunked paths (over prefixes of three lengths)
and the greedy continuation run as seven concurrent requests arriving at
different steps, through the scheduler, sharing batches, in a pool too small
for all of them (at least one is preempted and recomputed); each request is
checked against the reference.

flags:
`, golden.Tolerance)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return fmt.Errorf("no case folder given")
	}
	be, beClose, err := openBackend(*device, *threads)
	if err != nil {
		return err
	}
	defer beClose.Close()
	failed := false
	for _, dir := range fs.Args() {
		check := checkOne
		if *batched {
			check = func(ctx context.Context, dir string, be compute.Backend, w io.Writer) (bool, error) {
				return checkBatched(ctx, dir, be, *budget, w)
			}
		}
		ok, err := check(ctx, dir, be, stdout)
		if err != nil {
			fmt.Fprintf(stdout, "%s: error: %v\n", dir, err)
			failed = true
			continue
		}
		failed = failed || !ok
	}
	if failed {
		return errFailed
	}
	return nil
}

func checkOne(ctx context.Context, dir string, be compute.Backend, w io.Writer) (bool, error) {
	c, err := golden.Load(dir)
	if err != nil {
		return false, err
	}
	m, err := loadModel(dir, be, model.Options{})
	if err != nil {
		return false, err
	}
	defer m.Close()
	start := time.Now()
	rep, err := golden.Check(ctx, m, c)
	if err != nil {
		return false, err
	}
	fmt.Fprintf(w, "%s (%d tokens, prompt %d, chunks %v)\n", dir, len(c.InputIDs), c.Prompt, c.Chunks)
	for _, p := range rep.Paths {
		fmt.Fprintf(w, "  %-8s max abs diff %.3g (tolerance %g)  %s\n", p.Name, p.MaxAbs, p.Tolerance, verdict(p.OK()))
	}
	match := 0
	for i := range min(len(rep.Greedy), len(rep.Want)) {
		if rep.Greedy[i] != rep.Want[i] {
			break
		}
		match++
	}
	fmt.Fprintf(w, "  greedy   %d/%d ids match  %s\n", match, len(rep.Want), verdict(rep.GreedyOK()))
	if !rep.GreedyOK() {
		fmt.Fprintf(w, "           got  %v\n           want %v\n", rep.Greedy, rep.Want)
	}
	fmt.Fprintf(w, "  %s in %.1fs\n", verdict(rep.OK()), time.Since(start).Seconds())
	return rep.OK(), nil
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAIL"
}

func checkBatched(ctx context.Context, dir string, be compute.Backend, budget int, w io.Writer) (bool, error) {
	c, err := golden.Load(dir)
	if err != nil {
		return false, err
	}
	m, err := loadModel(dir, be, model.Options{})
	if err != nil {
		return false, err
	}
	defer m.Close()
	start := time.Now()
	rep, err := engine.CheckBatched(ctx, m, c, engine.BatchedOptions{Budget: budget})
	if err != nil {
		return false, err
	}
	fmt.Fprintf(w, "%s batched: %d requests, budget %d tokens/step, pool %d pages\n", dir, len(rep.Requests), budget, rep.PoolPages)
	for _, r := range rep.Requests {
		fmt.Fprintf(w, "  %s\n", r)
	}
	ok := rep.OK() && rep.Preemptions > 0
	fmt.Fprintf(w, "  %d steps, up to %d sequences per step, %d preemptions, %d pages held at the end\n", rep.Steps, rep.MaxBatchSeqs, rep.Preemptions, rep.PagesLeft)
	if rep.Preemptions == 0 {
		fmt.Fprintf(w, "  FAIL: no request was preempted\n")
	}
	fmt.Fprintf(w, "  %s in %.1fs\n", verdict(ok), time.Since(start).Seconds())
	return ok, nil
}
