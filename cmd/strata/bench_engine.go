package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/internal/membw"
	"github.com/strata-inference/strata/model"
)

// benchPrompts are n prompts of length tokens cut from the model's golden
// input ids (held-out text for the shipped model), repeated as needed.
func benchPrompts(dir string, n, length int) ([][]int32, error) {
	var src []int32
	if c, err := golden.Load(dir); err == nil {
		src = c.InputIDs
	} else {
		// No golden data (a synthetic checkpoint, say): ids spread over the
		// vocabulary, the same every run.
		vocab, err := vocabSize(dir)
		if err != nil {
			return nil, err
		}
		src = make([]int32, 4096)
		for i := range src {
			src[i] = int32(1 + (i*7919+104729)%(vocab-1))
		}
	}
	var out [][]int32
	for i := range n {
		p := make([]int32, length)
		for j := range p {
			p[j] = src[(i*17+j)%len(src)]
		}
		out = append(out, p)
	}
	return out, nil
}

// runBenchDecode measures decode speed with and without speculative decoding.
func runBenchDecode(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench decode", flag.ContinueOnError)
	dir := fs.String("model", defaultModel, "model folder (prompts from its golden data if it has some, else spread over its vocabulary)")
	batches := fs.String("batch", "1,16", "concurrent requests")
	n := fs.Int("n", 128, "tokens generated per request")
	promptLen := fs.Int("prompt", 64, "prompt tokens per request")
	threads := fs.Int("threads", 0, "compute goroutines (0: one per CPU)")
	device := deviceFlag(fs)
	maxDraft := fs.Int("max-draft", 4, "most drafted tokens per step")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the decoding (not the loading) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	bs, err := parseInts(*batches)
	if err != nil {
		return err
	}
	be, beClose, err := openBackend(*device, *threads)
	if err != nil {
		return err
	}
	defer beClose.Close()
	m, err := loadModel(*dir, be, model.Options{})
	if err != nil {
		return err
	}
	defer m.Close()
	bw := membw.Measure()
	var wb, kvb int64
	if d, ok := m.(model.DecodeReader); ok {
		wb, kvb = d.DecodeReadBytes(*promptLen + *n/2)
	}
	floor := float64(wb+kvb) / bw / 1e9
	fmt.Fprintf(stdout, "model %s, %d CPUs, memory read bandwidth %.1f GB/s; one decode step reads %.1f MB of weights and %.2f MB of cache: floor %.2f ms/step, %.0f tokens/s per sequence at batch 1\n",
		*dir, runtime.GOMAXPROCS(0), bw, float64(wb)/1e6, float64(kvb)/1e6, floor*1e3, 1/floor)
	if *profile != "" {
		stop, err := startCPUProfile(*profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	for _, B := range bs {
		prompts, err := benchPrompts(*dir, B, *promptLen)
		if err != nil {
			return err
		}
		var base []*benchRun
		for _, sp := range []engine.Speculation{{}, {Method: engine.SpecMTP}, {Method: engine.SpecMTP, Fixed: true}, {Method: engine.SpecNgram}, {Method: engine.SpecNgram, Fixed: true}} {
			sp.MaxDraft = *maxDraft
			if d, ok := m.(model.Drafter); sp.Method == engine.SpecMTP && (!ok || len(d.DraftSpecs()) == 0) {
				continue // no draft head (a checkpoint without MTP layers)
			}
			r, err := benchDecodeOnce(ctx, m, prompts, *n, sp)
			if err != nil {
				return err
			}
			name := sp.Method
			switch {
			case name == "":
				name = "plain"
				base = append(base, r)
			case sp.Fixed:
				name += fmt.Sprintf("/k=%d", *maxDraft)
			default:
				name += "/adaptive"
			}
			same := "identical to plain"
			for i := range r.out {
				if !slices.Equal(r.out[i], base[0].out[i]) {
					same = "DIFFERS from plain"
				}
			}
			acc := ""
			if r.stats.SpecDrafted > 0 {
				acc = fmt.Sprintf(", acceptance %.1f%% (%d of %d drafts), %.2f tokens per verification", 100*float64(r.stats.SpecAccepted)/float64(r.stats.SpecDrafted),
					r.stats.SpecAccepted, r.stats.SpecDrafted, float64(r.stats.SpecAccepted+r.stats.SpecSteps)/float64(max(1, r.stats.SpecSteps)))
			}
			of := ""
			if B == 1 && floor > 0 {
				of = fmt.Sprintf("; %.0f%% of the floor, %.2fx its time", 100*r.decodeRate*floor, 1/(r.decodeRate*floor))
			}
			fmt.Fprintf(stdout, "batch %2d %-14s decode %7.1f tokens/s (%.2fx plain%s), %d steps%s; greedy output %s\n",
				B, name, r.decodeRate, r.decodeRate/base[0].decodeRate, of, r.stats.Steps, acc, same)
			fmt.Fprintf(stdout, "         step cost model: %.2f ms + %.3f ms per token; MTP drafting pass %.2f ms\n",
				r.stats.StepSeconds*1e3, r.stats.TokenSeconds*1e3, r.stats.DraftSeconds*1e3)
		}
	}
	return nil
}

type benchRun struct {
	out        [][]int32
	decodeRate float64 // generated tokens per second after every prompt's first token
	stats      engine.Stats
}

func benchDecodeOnce(ctx context.Context, m model.Model, prompts [][]int32, n int, sp engine.Speculation) (*benchRun, error) {
	e, err := engine.New(m, engine.Config{MaxBatchTokens: 512, MaxSeqs: len(prompts), Pages: 64 * len(prompts) * 8, EOS: -1, NoPrefixCache: true, Speculation: sp})
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go e.Run(runCtx)
	r := &benchRun{out: make([][]int32, len(prompts))}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstDone time.Time
	var firsts int
	start := time.Now()
	var errs []error
	for i, p := range prompts {
		s, err := e.Submit(ctx, engine.Request{Prompt: p, MaxTokens: n})
		if err != nil {
			return nil, err
		}
		wg.Go(func() {
			for {
				ev, err := s.Recv(ctx)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				if ev.Err != nil {
					mu.Lock()
					errs = append(errs, ev.Err)
					mu.Unlock()
					return
				}
				r.out[i] = append(r.out[i], ev.Token)
				if len(r.out[i]) == 1 {
					mu.Lock()
					firsts++
					if firsts == len(prompts) {
						firstDone = time.Now()
					}
					mu.Unlock()
				}
				if ev.Finish != "" {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	end := time.Now()
	if firstDone.IsZero() {
		firstDone = start
	}
	r.decodeRate = float64(len(prompts)*(n-1)) / end.Sub(firstDone).Seconds()
	r.stats = e.Stats()
	return r, nil
}

// runBenchPrefix measures time to first token for requests that share a long
// system prompt, with and without the prefix cache.
func runBenchPrefix(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench prefix", flag.ContinueOnError)
	dir := fs.String("model", defaultModel, "model folder (with golden data, whose input ids make the prompts)")
	system := fs.Int("system", 1024, "tokens of shared system prompt")
	user := fs.Int("user", 24, "tokens of distinct user message per request")
	requests := fs.Int("requests", 8, "requests, one after another")
	threads := fs.Int("threads", 0, "compute goroutines (0: one per CPU)")
	device := deviceFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	be, beClose, err := openBackend(*device, *threads)
	if err != nil {
		return err
	}
	defer beClose.Close()
	m, err := loadModel(*dir, be, model.Options{})
	if err != nil {
		return err
	}
	defer m.Close()
	sys, err := benchPrompts(*dir, 1, *system)
	if err != nil {
		return err
	}
	users, err := benchPrompts(*dir, *requests, *user)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "model %s: %d requests, each a %d-token shared system prompt and a %d-token user message; prefix align %d\n",
		filepath.Clean(*dir), *requests, *system, *user, prefixAlign(m))
	var medians []time.Duration
	for _, off := range []bool{true, false} {
		e, err := engine.New(m, engine.Config{MaxBatchTokens: 512, Pages: 2000, EOS: -1, NoPrefixCache: off})
		if err != nil {
			return err
		}
		runCtx, stop := context.WithCancel(ctx)
		go e.Run(runCtx)
		var ttfts []time.Duration
		for i := range *requests {
			p := append(slices.Clone(sys[0]), users[i]...)
			start := time.Now()
			s, err := e.Submit(ctx, engine.Request{Prompt: p, MaxTokens: 4})
			if err != nil {
				stop()
				return err
			}
			if _, err := s.Recv(ctx); err != nil {
				stop()
				return err
			}
			ttfts = append(ttfts, time.Since(start))
			if _, _, err := s.Collect(ctx); err != nil {
				stop()
				return err
			}
		}
		st := e.Stats()
		stop()
		sorted := slices.Clone(ttfts)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		med := sorted[len(sorted)/2]
		medians = append(medians, med)
		name := "prefix cache on "
		if off {
			name = "prefix cache off"
		}
		fmt.Fprintf(stdout, "%s: time to first token: first request %v, median %v; prompt tokens restored from snapshots %d of %d\n",
			name, ttfts[0].Round(time.Millisecond), med.Round(time.Millisecond), st.PrefixHitTokens, *requests*(*system+*user))
	}
	fmt.Fprintf(stdout, "median time to first token, off/on: %.2fx\n", float64(medians[0])/float64(medians[1]))
	return nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range splitComma(s) {
		var v int
		if _, err := fmt.Sscan(f, &v); err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// prefixAlign is where the model's state can be restored from a snapshot
// (0: nowhere).
func prefixAlign(m model.Model) int {
	if a, ok := m.(model.PrefixAligner); ok {
		return a.PrefixAlign()
	}
	return 0
}

// vocabSize reads a checkpoint's vocabulary size from its config.json
// (top level, or the text_config of multimodal checkpoints).
func vocabSize(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return 0, err
	}
	var c struct {
		Vocab      int `json:"vocab_size"`
		TextConfig *struct {
			Vocab int `json:"vocab_size"`
		} `json:"text_config"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return 0, fmt.Errorf("%s/config.json: %w", dir, err)
	}
	if c.Vocab <= 1 && c.TextConfig != nil {
		c.Vocab = c.TextConfig.Vocab
	}
	if c.Vocab <= 1 {
		return 0, fmt.Errorf("%s/config.json: no vocab_size", dir)
	}
	return c.Vocab, nil
}
