package golden

import (
	"context"
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model"
)

// PathResult is one path's agreement with the reference.
type PathResult struct {
	Name      string
	MaxAbs    float64
	Tolerance float64 // the case's
}

// OK reports whether the path is within the case's tolerance.
func (p PathResult) OK() bool { return p.MaxAbs <= p.Tolerance }

// Report is the outcome of checking a model against a case.
type Report struct {
	Paths  []PathResult
	Greedy []int32 // the model's own greedy continuation
	Want   []int32
}

// GreedyOK reports whether the greedy continuation matches exactly.
func (r *Report) GreedyOK() bool {
	if len(r.Greedy) != len(r.Want) {
		return false
	}
	for i := range r.Greedy {
		if r.Greedy[i] != r.Want[i] {
			return false
		}
	}
	return true
}

// OK reports whether every path is within tolerance and greedy matches.
func (r *Report) OK() bool {
	for _, p := range r.Paths {
		if !p.OK() {
			return false
		}
	}
	return r.GreedyOK()
}

// Check runs c through m along every path, one sequence at a time, each in a
// fresh pool sized for it, and compares with the reference.
func Check(ctx context.Context, m model.Model, c *Case) (*Report, error) {
	if v := m.VocabSize(); v != c.Vocab {
		return nil, fmt.Errorf("golden: %s: model vocabulary %d, reference %d", c.Dir, v, c.Vocab)
	}
	L := len(c.InputIDs)
	rep := &Report{Want: c.Greedy}
	paths := []struct {
		name  string
		feeds []int
		want  []float32
	}{
		{"full", []int{L}, c.LogitsFull},
		{"decode", DecodeFeeds(c.Prompt, L), c.LogitsDecode},
		{"chunked", c.Chunks, c.LogitsChunked},
	}
	for _, p := range paths {
		got, err := Feed(ctx, m, c.InputIDs, p.feeds)
		if err != nil {
			return nil, fmt.Errorf("golden: %s: %s path: %w", c.Dir, p.name, err)
		}
		rep.Paths = append(rep.Paths, PathResult{p.name, MaxAbsDiff(got, p.want), c.Tolerance})
	}
	g, err := Greedy(ctx, m, c.InputIDs[:c.Prompt], len(c.Greedy))
	if err != nil {
		return nil, fmt.Errorf("golden: %s: greedy: %w", c.Dir, err)
	}
	rep.Greedy = g
	return rep, nil
}

// DecodeFeeds is a prompt-long prefill followed by single tokens up to n.
func DecodeFeeds(prompt, n int) []int {
	feeds := []int{prompt}
	for range n - prompt {
		feeds = append(feeds, 1)
	}
	return feeds
}

// Feed runs ids through one fresh sequence in steps of the given sizes and
// returns the logits of every position.
func Feed(ctx context.Context, m model.Model, ids []int32, feeds []int) ([]float32, error) {
	pool, err := cache.PoolFor(m.Backend(), m.CacheSpecs(), len(ids), 1)
	if err != nil {
		return nil, err
	}
	seq, err := m.NewSeq(pool)
	if err != nil {
		return nil, err
	}
	defer seq.Release()
	var out []float32
	pos := 0
	for _, n := range feeds {
		b := &model.Batch{Tokens: ids[pos : pos+n], Spans: []model.Span{{Seq: seq, Start: 0, Len: n, Logits: model.AllLogits}}}
		lg, err := m.Forward(ctx, b)
		if err != nil {
			return nil, err
		}
		out = append(out, lg...)
		pos += n
	}
	return out, nil
}

// Greedy prefills prompt and generates n tokens by argmax.
func Greedy(ctx context.Context, m model.Model, prompt []int32, n int) ([]int32, error) {
	pool, err := cache.PoolFor(m.Backend(), m.CacheSpecs(), len(prompt)+n, 1)
	if err != nil {
		return nil, err
	}
	seq, err := m.NewSeq(pool)
	if err != nil {
		return nil, err
	}
	defer seq.Release()
	var out []int32
	in := prompt
	for range n {
		b := &model.Batch{Tokens: in, Spans: []model.Span{{Seq: seq, Start: 0, Len: len(in), Logits: model.LastLogits}}}
		lg, err := m.Forward(ctx, b)
		if err != nil {
			return nil, err
		}
		next := Argmax(lg)
		out = append(out, next)
		in = []int32{next}
	}
	return out, nil
}

// Argmax is the index of the largest value, the lowest on ties.
func Argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}
