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
	"github.com/strata-inference/strata/tokenizer"
)

func runPerplexity(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("perplexity", flag.ContinueOnError)
	dir := fs.String("model", defaultModel, "model folder with config.json, weights and tokenizer.json")
	window := fs.Int("context", 512, "tokens per window; each window is scored with a fresh context")
	batch := fs.Int("batch", 4, "windows per forward pass")
	maxWindows := fs.Int("max-windows", 0, "score at most this many windows (0: all)")
	threads := fs.Int("threads", 0, "compute goroutines (0: one per CPU)")
	device := deviceFlag(fs)
	cacheDType := fs.String("cache-dtype", "f32", "how the cache stores KV entries and indexer keys: f32, bf16 or fp8")
	compare := fs.Bool("compare", false, "also run the f32-cache model on the same windows and report the mean KL divergence and top-1 agreement of this one against it")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: strata perplexity [flags] FILE

Scores a text file: the tokenizer encodes it as one document (bos, then the
text), the tokens are cut into consecutive windows of -context tokens (a
last partial window is dropped), and every token after the first of each
window is predicted from the ones before it in its window. Prints the mean
negative log-likelihood, the perplexity exp(NLL) and bits per byte; with
-compare, also KL(f32 || this) and how often both pick the same top token.

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
	dt, err := cache.ParseDType(*cacheDType)
	if err != nil {
		return err
	}
	be, beClose, err := openBackend(*device, *threads)
	if err != nil {
		return err
	}
	defer beClose.Close()
	m, err := loadModel(*dir, be, model.Options{CacheDType: dt})
	if err != nil {
		return err
	}
	defer m.Close()
	var ref model.Model
	if *compare {
		if ref, err = loadModel(*dir, cpu.New(*threads), model.Options{}); err != nil {
			return err
		}
		defer ref.Close()
	}
	ids := append([]int32{tok.BOS()}, tok.Encode(string(text), false)...)
	n := len(ids) / *window
	if *maxWindows > 0 {
		n = min(n, *maxWindows)
	}
	if n == 0 {
		return fmt.Errorf("%s: %d tokens is less than one window of %d", fs.Arg(0), len(ids), *window)
	}
	start := time.Now()
	var cmp comparison
	nll, scored, err := windowNLL(ctx, m, ref, ids, *window, n, *batch, &cmp, func(done int) {
		fmt.Fprintf(os.Stderr, "\rscored %d/%d windows", done, n)
	})
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return err
	}
	mean := nll / float64(scored)
	bytesScored := float64(len(text)) * float64(n**window) / float64(len(ids))
	fmt.Fprintf(stdout, "%s: %d tokens (%.2f bytes/token), %d windows of %d, %d tokens scored\n", fs.Arg(0), len(ids), float64(len(text))/float64(len(ids)), n, *window, scored)
	fmt.Fprintf(stdout, "cache %v: mean NLL %.4f nats/token, perplexity %.3f, %.4f bits/byte (%.1fs)\n", dt, mean, math.Exp(mean), nll/math.Ln2/bytesScored, time.Since(start).Seconds())
	if ref != nil {
		fmt.Fprintf(stdout, "against the f32 cache: perplexity %.3f, mean KL %.3g nats/token, top-1 agreement %.2f%% of %d positions\n",
			math.Exp(cmp.refNLL/float64(scored)), cmp.kl/float64(cmp.n), 100*float64(cmp.agree)/float64(cmp.n), cmp.n)
	}
	return nil
}

// comparison accumulates a model's agreement with a reference on the same
// positions.
type comparison struct {
	kl, refNLL float64
	agree, n   int
}

// add compares the logits rows of a model (q) and of the reference (p) at
// one position whose next token is next.
func (c *comparison) add(q, p []float32, next int32) {
	lq, lp := logSoftmax(q), logSoftmax(p)
	var kl float64
	for i := range lp {
		kl += math.Exp(lp[i]) * (lp[i] - lq[i])
	}
	c.kl += kl
	c.refNLL -= lp[next]
	if argmax(q) == argmax(p) {
		c.agree++
	}
	c.n++
}

func logSoftmax(row []float32) []float64 {
	mx := float64(row[0])
	for _, v := range row {
		mx = max(mx, float64(v))
	}
	var s float64
	for _, v := range row {
		s += math.Exp(float64(v) - mx)
	}
	ls := math.Log(s)
	out := make([]float64, len(row))
	for i, v := range row {
		out[i] = float64(v) - mx - ls
	}
	return out
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// windowNLL sums -log p(token) over positions 1.. of n consecutive windows
// of ids, batching several windows per forward pass; with a reference
// model it also compares the two on every scored position.
func windowNLL(ctx context.Context, m, ref model.Model, ids []int32, window, n, batch int, cmp *comparison, progress func(int)) (float64, int, error) {
	V := m.VocabSize()
	var nll float64
	scored := 0
	for w0 := 0; w0 < n; w0 += batch {
		toks := ids[w0*window : min(n, w0+batch)*window]
		logits, err := windowLogits(ctx, m, toks, window)
		if err != nil {
			return 0, 0, err
		}
		var rl []float32
		if ref != nil {
			if rl, err = windowLogits(ctx, ref, toks, window); err != nil {
				return 0, 0, err
			}
		}
		for r := range len(toks) {
			if r%window == window-1 {
				continue
			}
			row := logits[r*V : (r+1)*V]
			nll += -logSoftmaxAt(row, toks[r+1])
			scored++
			if ref != nil {
				cmp.add(row, rl[r*V:(r+1)*V], toks[r+1])
			}
		}
		progress(min(n, w0+batch))
	}
	return nll, scored, nil
}

// windowLogits runs each window of toks as a fresh sequence, all in one
// forward pass, and returns every position's logits.
func windowLogits(ctx context.Context, m model.Model, toks []int32, window int) ([]float32, error) {
	k := len(toks) / window
	pool, err := cache.PoolFor(m.Backend(), m.CacheSpecs(), window, k)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	b := &model.Batch{Tokens: toks}
	for w := range k {
		seq, err := m.NewSeq(pool)
		if err != nil {
			return nil, err
		}
		defer seq.Release()
		b.Spans = append(b.Spans, model.Span{Seq: seq, Start: w * window, Len: window, Logits: model.AllLogits})
	}
	return m.Forward(ctx, b)
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
