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
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/deepseekv4"
	"github.com/strata-inference/strata/tokenizer"
)

// defaultModel is the model that ships in the repository, relative to its root.
const defaultModel = "testdata/golden/deepseek-v4/flash-ratios"

func runGenerate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	dir := fs.String("model", defaultModel, "model folder (config.json, safetensors; tokenizer.json for text prompts)")
	prompt := fs.String("prompt", "", "text prompt (needs the model's tokenizer.json)")
	ids := fs.String("prompt-ids", "", "prompt as comma-separated token ids (default: a fixed example prompt)")
	n := fs.Int("n", 32, "tokens to generate")
	threads := fs.Int("threads", 0, "compute goroutines (0: one per CPU)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: strata generate [flags]\n\nGenerates greedily from a prompt and prints the tokens as they come, then timing.\n\nflags:\n")
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
	m, err := deepseekv4.Load(*dir, cpu.New(*threads))
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
	default:
		in = []int32{int32(m.Cfg.BOS)}
		for i := range 15 {
			in = append(in, int32((7*i+3)%m.VocabSize()))
		}
	}
	fmt.Fprintf(stdout, "model %s (loaded in %s)\nprompt %d tokens: %v\n", *dir, loadTime.Round(time.Millisecond), len(in), in)

	pool, err := cache.PoolFor(m.CacheSpecs(), len(in)+*n, 1)
	if err != nil {
		return err
	}
	seq, err := m.NewSeq(pool)
	if err != nil {
		return err
	}
	defer seq.Release()

	var dec *tokenizer.Decoder
	if tok != nil {
		dec = tok.NewDecoder(true)
	}
	var out []int32
	t0 := time.Now()
	var ttft time.Duration
	next := in
	for i := range *n {
		b := &model.Batch{Tokens: next, Spans: []model.Span{{Seq: seq, Len: len(next), Logits: model.LastLogits}}}
		logits, err := m.Forward(ctx, b)
		if err != nil {
			return err
		}
		id := golden.Argmax(logits)
		if i == 0 {
			ttft = time.Since(t0)
		}
		out = append(out, id)
		if dec != nil {
			fmt.Fprint(stdout, dec.Add(id))
		} else {
			fmt.Fprintf(stdout, "%d ", id)
		}
		next = []int32{id}
		if tok != nil && id == tok.EOS() {
			break
		}
	}
	if dec != nil {
		fmt.Fprint(stdout, dec.Flush())
	}
	total := time.Since(t0)
	fmt.Fprintln(stdout)
	decodeTokens := len(out) - 1
	fmt.Fprintf(stdout, "generated %d tokens: %v\n", len(out), out)
	fmt.Fprintf(stdout, "prefill %d tokens in %s (%.1f tokens/s, time to first token)\n", len(in), ttft.Round(time.Microsecond), float64(len(in))/ttft.Seconds())
	if decodeTokens > 0 {
		d := total - ttft
		fmt.Fprintf(stdout, "decode %d tokens in %s (%.1f tokens/s, %.2f ms/token)\n", decodeTokens, d.Round(time.Microsecond), float64(decodeTokens)/d.Seconds(), d.Seconds()*1000/float64(decodeTokens))
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
