package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/deepseekv4"
	"github.com/strata-inference/strata/tokenizer"
)

func runPerplexity(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("perplexity", flag.ContinueOnError)
	dir := fs.String("model", defaultModel, "model folder with config.json, weights and tokenizer.json")
	window := fs.Int("context", 512, "tokens per window; each window is scored with a fresh context")
	batch := fs.Int("batch", 4, "windows per forward pass")
	maxWindows := fs.Int("max-windows", 0, "score at most this many windows (0: all)")
	threads := fs.Int("threads", 0, "compute goroutines (0: one per CPU)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: strata perplexity [flags] FILE

Scores a text file: the tokenizer encodes it as one document (bos, then the
text), the tokens are cut into consecutive windows of -context tokens (a
last partial window is dropped), and every token after the first of each
window is predicted from the ones before it in its window. Prints the mean
negative log-likelihood, the perplexity exp(NLL) and bits per byte.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("want one text file")
	}
	if *window < 2 || *batch < 1 {
		return fmt.Errorf("-context %d and -batch %d: want at least 2 and 1", *window, *batch)
	}
	text, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	tok, err := tokenizer.LoadDir(*dir)
	if err != nil {
		return err
	}
	m, err := deepseekv4.Load(*dir, cpu.New(*threads))
	if err != nil {
		return err
	}
	defer m.Close()
	ids := append([]int32{tok.BOS()}, tok.Encode(string(text), false)...)
	n := len(ids) / *window
	if *maxWindows > 0 {
		n = min(n, *maxWindows)
	}
	if n == 0 {
		return fmt.Errorf("%s: %d tokens is less than one window of %d", fs.Arg(0), len(ids), *window)
	}
	start := time.Now()
	nll, scored, err := windowNLL(ctx, m, ids, *window, n, *batch, func(done int) {
		fmt.Fprintf(os.Stderr, "\rscored %d/%d windows", done, n)
	})
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return err
	}
	mean := nll / float64(scored)
	bytesScored := float64(len(text)) * float64(n**window) / float64(len(ids))
	fmt.Fprintf(stdout, "%s: %d tokens (%.2f bytes/token), %d windows of %d, %d tokens scored\n", fs.Arg(0), len(ids), float64(len(text))/float64(len(ids)), n, *window, scored)
	fmt.Fprintf(stdout, "mean NLL %.4f nats/token, perplexity %.3f, %.4f bits/byte (%.1fs)\n", mean, math.Exp(mean), nll/math.Ln2/bytesScored, time.Since(start).Seconds())
	return nil
}

// windowNLL sums -log p(token) over positions 1.. of n consecutive windows
// of ids, batching several windows per forward pass.
func windowNLL(ctx context.Context, m *deepseekv4.Model, ids []int32, window, n, batch int, progress func(int)) (float64, int, error) {
	pool, err := cache.PoolFor(m.Backend(), m.CacheSpecs(), window, batch)
	if err != nil {
		return 0, 0, err
	}
	V := m.VocabSize()
	var nll float64
	scored := 0
	for w0 := 0; w0 < n; w0 += batch {
		b := &model.Batch{}
		var seqs []*cache.Seq
		for w := w0; w < min(n, w0+batch); w++ {
			seq, err := m.NewSeq(pool)
			if err != nil {
				return 0, 0, err
			}
			seqs = append(seqs, seq)
			b.Spans = append(b.Spans, model.Span{Seq: seq, Start: len(b.Tokens), Len: window, Logits: model.AllLogits})
			b.Tokens = append(b.Tokens, ids[w*window:(w+1)*window]...)
		}
		logits, err := m.Forward(ctx, b)
		for _, s := range seqs {
			s.Release()
		}
		if err != nil {
			return 0, 0, err
		}
		for _, sp := range b.Spans {
			for i := range window - 1 {
				row := logits[(sp.Start+i)*V : (sp.Start+i+1)*V]
				nll += -logSoftmaxAt(row, b.Tokens[sp.Start+i+1])
				scored++
			}
		}
		progress(min(n, w0+batch))
	}
	return nll, scored, nil
}

func logSoftmaxAt(row []float32, t int32) float64 {
	mx := float64(row[0])
	for _, v := range row {
		mx = max(mx, float64(v))
	}
	var s float64
	for _, v := range row {
		s += math.Exp(float64(v) - mx)
	}
	return float64(row[t]) - mx - math.Log(s)
}
