// Package golden loads reference cases (a model folder plus the logits an
// independent implementation computed for it, in the format of
// shared/golden/deepseek-v4) and checks a model against them along every
// path: one full pass, prefill then one-token decode, chunked prefill, and
// the greedy continuation.
package golden

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/strata-inference/strata/safetensors"
)

// Tolerance is the largest max-abs logit difference a float32 implementation
// may show against the reference on any path, unless the case's golden.json
// gives its own ("tolerance": families whose reference computes parts in
// float32 even in a float64 run).
const Tolerance = 1e-4

// Case is one reference case.
type Case struct {
	Dir      string
	InputIDs []int32
	Vocab    int
	// Logits of every position, [len(InputIDs), Vocab], along each path.
	LogitsFull, LogitsDecode, LogitsChunked []float32
	Greedy                                  []int32 // argmax continuation of InputIDs[:Prompt]
	Prompt                                  int
	Chunks                                  []int
	// FullOnly is set when the case stores only logits_full (cases of models
	// with large vocabularies do, to stay small): the decode and chunked
	// paths are then compared against it. The reference's own paths agree
	// with it to PathSpread.
	FullOnly   bool
	PathSpread float64
	// Tolerance is the case's: golden.json's "tolerance", else Tolerance.
	Tolerance float64
}

type caseJSON struct {
	Prompt     int     `json:"prompt"`
	Chunks     []int   `json:"chunks"`
	PathSpread float64 `json:"max_abs_diff_between_paths"`
	Tolerance  float64 `json:"tolerance"`
}

// Load reads dir/golden.json and dir/golden.safetensors.
func Load(dir string) (*Case, error) {
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	var cj caseJSON
	if err := json.Unmarshal(b, &cj); err != nil {
		return nil, fmt.Errorf("golden: %s: %w", filepath.Join(dir, "golden.json"), err)
	}
	path := filepath.Join(dir, "golden.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c := &Case{Dir: dir, Prompt: cj.Prompt, Chunks: cj.Chunks, PathSpread: cj.PathSpread, Tolerance: cj.Tolerance}
	if c.Tolerance <= 0 {
		c.Tolerance = Tolerance
	}
	ints := func(name string) ([]int32, error) {
		t, ok := f.Tensor(name)
		if !ok {
			return nil, fmt.Errorf("golden: %s: no tensor %q", path, name)
		}
		v, err := t.Int64s()
		if err != nil {
			return nil, err
		}
		out := make([]int32, len(v))
		for i, x := range v {
			out[i] = int32(x)
		}
		return out, nil
	}
	if c.InputIDs, err = ints("input_ids"); err != nil {
		return nil, err
	}
	if c.Greedy, err = ints("greedy_ids"); err != nil {
		return nil, err
	}
	L := len(c.InputIDs)
	for _, x := range []struct {
		name string
		dst  *[]float32
	}{{"logits_full", &c.LogitsFull}, {"logits_decode", &c.LogitsDecode}, {"logits_chunked", &c.LogitsChunked}} {
		t, ok := f.Tensor(x.name)
		if !ok && x.name != "logits_full" {
			c.FullOnly = true
			continue
		}
		if !ok {
			return nil, fmt.Errorf("golden: %s: no tensor %q", path, x.name)
		}
		if len(t.Shape) != 2 || t.Shape[0] != L {
			return nil, fmt.Errorf("golden: %s: %s has shape %v, want [%d, vocab]", path, x.name, t.Shape, L)
		}
		if c.Vocab == 0 {
			c.Vocab = t.Shape[1]
		} else if t.Shape[1] != c.Vocab {
			return nil, fmt.Errorf("golden: %s: %s has vocab %d, want %d", path, x.name, t.Shape[1], c.Vocab)
		}
		if *x.dst, err = t.Float32s(); err != nil {
			return nil, err
		}
	}
	if c.FullOnly {
		if c.PathSpread <= 0 || c.PathSpread > Tolerance/4 {
			return nil, fmt.Errorf("golden: %s: stores only logits_full but max_abs_diff_between_paths is %g", dir, c.PathSpread)
		}
		c.LogitsDecode, c.LogitsChunked = c.LogitsFull, c.LogitsFull
	}
	if c.Prompt <= 0 || c.Prompt > L {
		return nil, fmt.Errorf("golden: %s: prompt %d outside [1, %d]", dir, c.Prompt, L)
	}
	sum := 0
	for _, n := range c.Chunks {
		if n <= 0 {
			return nil, fmt.Errorf("golden: %s: chunk size %d", dir, n)
		}
		sum += n
	}
	if sum != L {
		return nil, fmt.Errorf("golden: %s: chunks sum to %d, want %d", dir, sum, L)
	}
	return c, nil
}

// MaxAbsDiff is the largest |a[i]-b[i]|; +Inf when a NaN differs or lengths differ.
func MaxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return inf
	}
	var m float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		if d < 0 {
			d = -d
		}
		if d != d {
			return inf
		}
		m = max(m, d)
	}
	return m
}

var inf = math.Inf(1)
