package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/tokenizer"
)

// defaultModel is the model that ships in the repository, relative to its root.
const defaultModel = "models/strata-kjv"

// defaultPrompt is the prompt generate uses when none is given.
const defaultPrompt = "And God said"

func runGenerate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	dir := fs.String("model", defaultModel, "model folder (config.json, safetensors; tokenizer.json for text prompts)")
	prompt := fs.String("prompt", "", "text prompt (needs the model's tokenizer.json; default \""+defaultPrompt+"\")")
	ids := fs.String("prompt-ids", "", "prompt as comma-separated token ids (default: a fixed example prompt)")
	n := fs.Int("n", 60, "tokens to generate")
	var sp engine.Sampling
	fs.Float64Var(&sp.Temperature, "temperature", 0, "sampling temperature (0: greedy)")
	fs.IntVar(&sp.TopK, "top-k", 0, "keep the k most likely tokens (0: all)")
	fs.Float64Var(&sp.TopP, "top-p", 0, "nucleus sampling threshold (0: off)")
	fs.Float64Var(&sp.MinP, "min-p", 0, "drop tokens below this fraction of the best one's probability")
	fs.Float64Var(&sp.RepetitionPenalty, "repetition-penalty", 0, "penalize tokens already seen (1 or 0: off)")
	fs.Uint64Var(&sp.Seed, "seed", 1, "sampling seed")
	threads := fs.Int("threads", 0, "compute goroutines (0: one per CPU)")
	device := deviceFlag(fs)
	profile := fs.String("cpuprofile", "", "write a CPU profile of the generation (not the loading) to this file")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: strata generate [flags]\n\nGenerates from a prompt (greedily unless -temperature is set) and prints the\ntokens as they come, then the prefill and decode speed.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *n <= 0 {
		return fmt.Errorf("-n %d: want at least one token", *n)
	}
	start := time.Now()
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
	loadTime := time.Since(start)

	var tok *tokenizer.Tokenizer
	if _, err := os.Stat(filepath.Join(*dir, "tokenizer.json")); err == nil {
		if tok, err = tokenizer.LoadDir(*dir); err != nil {
			return err
		}
	}
	var in []int32
	switch {
	case *prompt != "" && *ids != "":
		return fmt.Errorf("give -prompt or -prompt-ids, not both")
	case *prompt != "":
		if tok == nil {
			return fmt.Errorf("%s has no tokenizer.json; give -prompt-ids instead", *dir)
		}
		if tok.AddBOS() {
			in = append(in, tok.BOS())
		}
		in = append(in, tok.Encode(*prompt, false)...)
	case *ids != "":
		if in, err = parseIDs(*ids, m.VocabSize()); err != nil {
			return err
		}
	case tok != nil:
		*prompt = defaultPrompt
		if tok.AddBOS() {
			in = append(in, tok.BOS())
		}
		in = append(in, tok.Encode(*prompt, false)...)
	default:
		in = []int32{max(m.Info().BOS, 0)}
		for i := range 15 {
			in = append(in, int32((7*i+3)%m.VocabSize()))
		}
	}
	fmt.Fprintf(stdout, "model %s (loaded in %s)\nprompt %d tokens: %v\n", *dir, loadTime.Round(time.Millisecond), len(in), in)
	if *prompt != "" {
		fmt.Fprint(stdout, *prompt)
	}
	if *profile != "" {
		stop, err := startCPUProfile(*profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	eos := m.Info().EOS
	if tok == nil {
		eos = -1 // without a tokenizer the ids are arbitrary: generate all n
	}

	e, err := engine.New(m, engine.Config{
		Pages:      cache.TotalPages(m.CacheSpecs(), len(in)+*n, cache.PageBytesFor(m.CacheSpecs())),
		MaxContext: m.Info().MaxContext,
		EOS:        eos,
	})
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go e.Run(runCtx)
	t0 := time.Now()
	stream, err := e.Submit(ctx, engine.Request{Prompt: in, MaxTokens: *n, Sampling: sp})
	if err != nil {
		return err
	}
	var dec *tokenizer.Decoder
	if tok != nil {
		dec = tok.NewDecoder(true)
	}
	var out []int32
	var ttft time.Duration
	var last engine.Event
	for {
		ev, err := stream.Recv(ctx)
		if err != nil {
			return err
		}
		if ev.Err != nil {
			return ev.Err
		}
		if len(out) == 0 {
			ttft = time.Since(t0)
		}
		out = append(out, ev.Token)
		if dec != nil {
			fmt.Fprint(stdout, dec.Add(ev.Token))
		} else {
			fmt.Fprintf(stdout, "%d ", ev.Token)
		}
		if ev.Finish != "" {
			last = ev
			break
		}
	}
	if dec != nil {
		fmt.Fprint(stdout, dec.Flush())
	}
	total := time.Since(t0)
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "generated %d tokens (%s): %v\n", len(out), last.Finish, out)
	fmt.Fprintf(stdout, "prefill %d tokens in %s (%.1f tokens/s, time to first token)\n", len(in), ttft.Round(time.Microsecond), float64(len(in))/ttft.Seconds())
	if k := len(out) - 1; k > 0 {
		d := total - ttft
		fmt.Fprintf(stdout, "decode %d tokens in %s (%.1f tokens/s, %.2f ms/token)\n", k, d.Round(time.Microsecond), float64(k)/d.Seconds(), d.Seconds()*1000/float64(k))
	}
	return nil
}

// parseIDs reads "1,2, 3" into token ids, each within the vocabulary.
func parseIDs(s string, vocab int) ([]int32, error) {
	var ids []int32
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("prompt id %d: %q is not an integer", i, f)
		}
		if v < 0 || v >= vocab {
			return nil, fmt.Errorf("prompt id %d: %d is outside the vocabulary of %d", i, v, vocab)
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}
