package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/strata-inference/strata/server"
	"github.com/strata-inference/strata/server/loadgen"
	"github.com/strata-inference/strata/server/servertest"
)

// benchmarks are the subcommands of strata bench.
func benchmarks() map[string]command {
	return map[string]command{
		"serve":   {"a bounded load of concurrent streaming clients against strata serve", runBenchServe},
		"decode":  {"decode speed at batch 1 and 16: plain, MTP and n-gram speculation, acceptance rates", runBenchDecode},
		"prefix":  {"time to first token on a long shared system prompt, with and without the prefix cache", runBenchPrefix},
		"prefill": {"prefill tokens/s (and GFLOP/s) of one prompt on any checkpoint", runBenchPrefill},
	}
}

func runBench(ctx context.Context, args []string, stdout io.Writer) error {
	all := benchmarks()
	if len(args) > 0 {
		if b, ok := all[args[0]]; ok {
			return b.run(ctx, args[1:], stdout)
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	out := io.Writer(os.Stderr)
	if len(args) > 0 && isHelp(args[0]) {
		out = stdout
	}
	fmt.Fprintf(out, "usage: strata bench <benchmark> [flags]\n\nbenchmarks:\n")
	for _, n := range names {
		fmt.Fprintf(out, "  %-8s %s\n", n, all[n].summary)
	}
	if len(args) > 0 && isHelp(args[0]) {
		return nil
	}
	if len(args) == 0 {
		return fmt.Errorf("want a benchmark name")
	}
	return fmt.Errorf("unknown benchmark %q", args[0])
}

func runBenchServe(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench serve", flag.ContinueOnError)
	var cfg serveConfig
	addServeFlags(fs, &cfg)
	url := fs.String("url", "", "load a running server at this base URL (e.g. http://127.0.0.1:8000) instead of starting one in-process on loopback")
	name := fs.String("served-model-name", "", "model name to request (default: the in-process server's, or the first of the -url server's GET /v1/models)")
	synthetic := fs.Bool("synthetic", false, "serve the synthetic test model (random weights, written to a temporary folder) instead of -model")
	var lc loadgen.Config
	fs.IntVar(&lc.Concurrency, "concurrency", 64, "streaming clients at once")
	fs.IntVar(&lc.Requests, "requests", 256, "requests in all")
	fs.IntVar(&lc.MinTokens, "min-tokens", 8, "smallest max_tokens of a request")
	fs.IntVar(&lc.MaxTokens, "max-tokens", 64, "largest max_tokens of a request")
	fs.Uint64Var(&lc.Seed, "seed", 1, "seed of the request mix")
	fs.IntVar(&lc.Verify, "verify", 32, "requests to replay for the determinism check (negative: none)")
	var fair fairScenario
	fs.IntVar(&fair.long, "long-prompt", 0, "instead of the load: the long-prompt scenario with a prompt of this many tokens arriving while -streams streams decode, and -shorts short requests after -short-delay; run first come first served and with -step-target, side by side")
	fs.IntVar(&fair.streams, "streams", 4, "with -long-prompt: steady streams")
	fs.IntVar(&fair.streamTokens, "stream-tokens", 100000, "with -long-prompt: tokens each steady stream may generate (they are stopped when the long prompt's first token comes)")
	fs.IntVar(&fair.shorts, "shorts", 4, "with -long-prompt: short requests")
	fs.DurationVar(&fair.shortDelay, "short-delay", time.Second, "with -long-prompt: when the short requests follow the long prompt")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: strata bench serve [flags]\n\n"+
			"Starts strata serve in-process on a loopback port (or targets -url) and sends\n"+
			"-requests streaming /v1/completions requests from -concurrency clients, each\n"+
			"with its own prompt, max_tokens and seed, generating exactly max_tokens\n"+
			"tokens (ignore_eos). Checks every stream, the server's /metrics against what\n"+
			"was sent, and a replay of some requests; prints time to first token,\n"+
			"inter-token latency and throughput; exits 1 if a check failed.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if fair.long > 0 {
		if *url != "" || *synthetic {
			return fmt.Errorf("-long-prompt runs the in-process server on -model")
		}
		cfg.maxSeqs = max(cfg.maxSeqs, fair.streams+fair.shorts+1)
		return benchLongPrompt(ctx, cfg, fair, stdout)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	lc.URL, lc.Model = *url, *name
	what := *url
	var s *served
	if *url == "" {
		if cfg.maxSeqs < lc.Concurrency {
			cfg.maxSeqs = lc.Concurrency
		}
		if *synthetic {
			tmp, err := os.MkdirTemp("", "strata-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			if err := servertest.WriteSynthetic(tmp, 1); err != nil {
				return err
			}
			cfg.dir = tmp
			cfg.name = "synthetic"
		}
		var err error
		if s, err = loadServed(cfg, log); err != nil {
			if cfg.dir == defaultModel {
				return fmt.Errorf("%w (or run with -synthetic to benchmark the synthetic test model)", err)
			}
			return err
		}
		defer s.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		engDone := make(chan struct{})
		go func() {
			s.eng.Run(runCtx)
			close(engDone)
		}()
		srvDone := make(chan error, 1)
		go func() { srvDone <- server.Serve(runCtx, ln, s.srv, 5*time.Second, log) }()
		defer func() {
			stop()
			<-srvDone
			<-engDone
		}()
		lc.URL = "http://" + ln.Addr().String()
		if lc.Model == "" {
			lc.Model = s.name
		}
		lc.CountPrompt = func(p string) int {
			n := len(s.tok.Encode(p, true))
			if s.tok.AddBOS() {
				n++
			}
			return n
		}
		what = fmt.Sprintf("%s (%s) in-process at %s", cfg.dir, s.name, lc.URL)
		if *synthetic {
			what = fmt.Sprintf("the synthetic test model in-process at %s", lc.URL)
		}
	} else if lc.Model == "" {
		m, err := firstModel(ctx, *url)
		if err != nil {
			return err
		}
		lc.Model = m
	}
	fmt.Fprintf(stdout, "strata bench serve: %s\n", what)
	fmt.Fprintf(stdout, "machine        %s/%s, %d CPUs (GOMAXPROCS %d)\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(stdout, "load           %d requests from %d streaming clients, max_tokens %d-%d, seed %d\n",
		lc.Requests, lc.Concurrency, lc.MinTokens, lc.MaxTokens, lc.Seed)
	if s != nil {
		fmt.Fprintf(stdout, "server         max-concurrency %d, batch-tokens %d, %d cache pages, context %d\n",
			cfg.maxSeqs, cfg.batchTokens, s.eng.Pool().NumPages(), s.srv.MaxContext())
	}
	rep, err := loadgen.Run(ctx, lc)
	if err != nil {
		return err
	}
	rep.Write(stdout)
	if s != nil {
		st := s.eng.Stats()
		fmt.Fprintf(stdout, "engine         %d steps, up to %d sequences a step, %d preemptions, %d cancelled\n",
			st.Steps, st.MaxBatchSeqs, st.Preemptions, st.Cancelled)
	}
	if !rep.Passed() {
		fmt.Fprintf(stdout, "FAILED\n")
		return errFailed
	}
	fmt.Fprintf(stdout, "PASSED\n")
	return nil
}

// firstModel asks a server for the models it serves and returns the first.
func firstModel(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/v1/models", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data) == 0 {
		return "", fmt.Errorf("GET %s/v1/models: no model listed (%v); give -served-model-name", url, err)
	}
	return list.Data[0].ID, nil
}
