package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/strata-inference/strata/server"
)

// fairScenario is bench serve's long-prompt scenario: steady streams are
// decoding when one long prompt arrives, and short requests arrive while
// it prefills.
type fairScenario struct {
	streams, streamTokens int           // steady streams and the tokens each generates
	long                  int           // tokens of the long prompt
	shorts                int           // short requests (5-token prompts, 4 tokens out)
	shortDelay            time.Duration // after the long prompt is sent
}

// fairResult is what one run of the scenario measured.
type fairResult struct {
	itl           []time.Duration // gaps between the steady streams' chunks while the long prompt prefilled
	shortTTFT     []time.Duration
	longTTFT      time.Duration
	prefillWindow time.Duration
}

// runFairScenario runs sc against a server at url, whose model has vocab
// token ids.
func runFairScenario(ctx context.Context, url, model string, vocab int, sc fairScenario) (*fairResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ids := func(n, seed int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = 1 + (i*7919+seed*104729)%(vocab-1)
		}
		return p
	}
	type arrival struct{ at []time.Time }
	var mu sync.Mutex
	steady := make([]*arrival, sc.streams)
	errs := make(chan error, sc.streams+sc.shorts+1)
	started := make(chan struct{}, sc.streams)
	var wg sync.WaitGroup
	for i := range sc.streams {
		steady[i] = &arrival{}
		wg.Go(func() {
			first := true
			err := streamCompletion(ctx, url, model, ids(8, i), sc.streamTokens, func(t time.Time) {
				mu.Lock()
				steady[i].at = append(steady[i].at, t)
				mu.Unlock()
				if first {
					first = false
					started <- struct{}{}
				}
			})
			if err != nil && ctx.Err() == nil {
				errs <- err
			}
		})
	}
	for range sc.streams {
		select {
		case <-started:
		case err := <-errs:
			return nil, err
		}
	}
	time.Sleep(200 * time.Millisecond) // the streams are in steady decoding
	res := &fairResult{}
	t0 := time.Now()
	longDone := make(chan time.Time, 1)
	go func() {
		first := true
		err := streamCompletion(ctx, url, model, ids(sc.long, 99), 2, func(t time.Time) {
			if first {
				first = false
				longDone <- t
			}
		})
		if err != nil && ctx.Err() == nil {
			errs <- err
		}
	}()
	time.Sleep(sc.shortDelay)
	var shortWG sync.WaitGroup
	for j := range sc.shorts {
		shortWG.Go(func() {
			sent := time.Now()
			first := true
			err := streamCompletion(ctx, url, model, ids(5, 1000+j), 4, func(t time.Time) {
				if first {
					first = false
					mu.Lock()
					res.shortTTFT = append(res.shortTTFT, t.Sub(sent))
					mu.Unlock()
				}
			})
			if err != nil && ctx.Err() == nil {
				errs <- err
			}
		})
	}
	var tl time.Time
	select {
	case tl = <-longDone:
	case err := <-errs:
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	shortWG.Wait()
	res.longTTFT, res.prefillWindow = tl.Sub(t0), tl.Sub(t0)
	cancel() // the steady streams have served their purpose
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, a := range steady {
		for k := 1; k < len(a.at); k++ {
			if a.at[k].After(t0) && !a.at[k-1].Before(t0) && !a.at[k].After(tl) {
				res.itl = append(res.itl, a.at[k].Sub(a.at[k-1]))
			}
		}
	}
	return res, nil
}

// streamCompletion posts a streaming /v1/completions request of token ids
// and calls chunk with the arrival time of every data event that carries
// text, until the stream ends.
func streamCompletion(ctx context.Context, url, model string, prompt []int, maxTokens int, chunk func(time.Time)) error {
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": maxTokens, "stream": true, "ignore_eos": true, "temperature": 0})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") || line == "data: [DONE]" {
			continue
		}
		chunk(time.Now())
	}
	return sc.Err()
}

// benchLongPrompt runs the long-prompt scenario on the in-process server
// twice, first come first served and with the step-time target, and
// prints both side by side.
func benchLongPrompt(ctx context.Context, cfg serveConfig, sc fairScenario, stdout io.Writer) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	target := cfg.stepTarget
	fmt.Fprintf(stdout, "strata bench serve -long-prompt: %d steady streams decoding; a %d-token prompt arrives, and %d 5-token requests %v later\n",
		sc.streams, sc.long, sc.shorts, sc.shortDelay)
	fmt.Fprintf(stdout, "%-34s %10s %10s %10s %14s %14s\n", "schedule", "ITL p50", "ITL p99", "ITL max", "short TTFT p50", "long TTFT")
	for _, st := range []time.Duration{0, target} {
		cfg.stepTarget = st
		s, err := loadServed(cfg, log)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.Close()
			return err
		}
		runCtx, stop := context.WithCancel(ctx)
		engDone := make(chan struct{})
		go func() { s.eng.Run(runCtx); close(engDone) }()
		srvDone := make(chan error, 1)
		go func() { srvDone <- server.Serve(runCtx, ln, s.srv, 5*time.Second, log) }()
		res, err := runFairScenario(ctx, "http://"+ln.Addr().String(), s.name, s.model.VocabSize(), sc)
		stop()
		<-srvDone
		<-engDone
		s.Close()
		if err != nil {
			return err
		}
		name := "first come, first served"
		if st > 0 {
			name = fmt.Sprintf("step target %v (decodes first)", st)
		}
		fmt.Fprintf(stdout, "%-34s %10s %10s %10s %14s %14s\n", name, pct(res.itl, 50), pct(res.itl, 99), pct(res.itl, 100), pct(res.shortTTFT, 50), res.longTTFT.Round(time.Millisecond))
	}
	return nil
}

// pct is the p-th percentile of ds, rounded for printing.
func pct(ds []time.Duration, p int) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(time.Millisecond).String()
}
