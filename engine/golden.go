package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

// BatchedOptions shape a batched golden check. Zero values pick defaults.
type BatchedOptions struct {
	// Budget is the per-step token budget (default 37, so prompt chunks end
	// inside compression windows).
	Budget int
	// Pages sizes the pool. The default holds the largest request at its
	// full length plus another at its prompt: two decoding requests share
	// batches, and run out of pages as they grow.
	Pages int
	// StepTarget schedules for latency (Config.StepTarget) instead of
	// first come, first served.
	StepTarget time.Duration
}

// RequestResult is one request's agreement with the reference.
type RequestResult struct {
	Name      string
	MaxAbs    float64 // logit paths; -1 for greedy requests
	Tolerance float64 // the case's
	Tokens    []int32 // greedy requests: generated ids
	Want      []int32
	Finished  FinishReason
}

// OK reports whether the request matched.
func (r RequestResult) OK() bool {
	if r.MaxAbs >= 0 {
		return r.MaxAbs <= r.Tolerance
	}
	if len(r.Tokens) != len(r.Want) {
		return false
	}
	for i := range r.Tokens {
		if r.Tokens[i] != r.Want[i] {
			return false
		}
	}
	return true
}

func (r RequestResult) String() string {
	if r.MaxAbs >= 0 {
		return fmt.Sprintf("%-26s max abs diff %.3g  %s", r.Name, r.MaxAbs, okWord(r.OK()))
	}
	return fmt.Sprintf("%-26s %d ids  %s", r.Name, len(r.Tokens), okWord(r.OK()))
}

func okWord(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAIL"
}

// BatchedReport is the outcome of CheckBatched.
type BatchedReport struct {
	Requests     []RequestResult
	Preemptions  int64
	MaxBatchSeqs int
	Steps        int64
	PoolPages    int
	PagesLeft    int // pages still held after every request finished, prefix snapshots aside (want 0)
}

// OK reports whether every request matched and the pool ended empty.
func (r *BatchedReport) OK() bool {
	for _, q := range r.Requests {
		if !q.OK() {
			return false
		}
	}
	return r.PagesLeft == 0
}

// CheckBatched runs a golden case's decode path (prompt, then the reference
// ids fed one per step), its chunked path (the whole prefix as a prompt,
// chunked by the token budget) and its greedy continuation as concurrent
// requests over prefixes of different lengths, arriving at different steps,
// through the scheduler with a pool too small for all of them at once, and
// compares each with the single-sequence reference.
func CheckBatched(ctx context.Context, m model.Model, c *golden.Case, opt BatchedOptions) (*BatchedReport, error) {
	if opt.Budget <= 0 {
		opt.Budget = 37
	}

	L, V := len(c.InputIDs), c.Vocab
	if m.VocabSize() != V {
		return nil, fmt.Errorf("engine: model vocabulary %d, reference %d", m.VocabSize(), V)
	}
	type job struct {
		name   string
		req    Request
		n      int // positions compared
		want   []float32
		greedy bool
		got    map[int][]float32
	}
	var jobs []*job
	lengths := []int{L, L - L/10, L / 2}
	// The decode requests come first: they grow as they decode, which is
	// what runs the pool out.
	for _, n := range lengths {
		p := min(c.Prompt, n)
		j := &job{name: fmt.Sprintf("decode, %d tokens", n), n: n, want: c.LogitsDecode, got: map[int][]float32{}}
		j.req = Request{Prompt: c.InputIDs[:p], Forced: c.InputIDs[p:n], MaxTokens: n - p + 1}
		jobs = append(jobs, j)
	}
	for _, n := range lengths {
		j := &job{name: fmt.Sprintf("chunked, %d tokens", n), n: n, want: c.LogitsChunked, got: map[int][]float32{}}
		j.req = Request{Prompt: c.InputIDs[:n], MaxTokens: 1}
		jobs = append(jobs, j)
	}
	jobs = append(jobs, &job{name: fmt.Sprintf("greedy, %d tokens", len(c.Greedy)), greedy: true,
		req: Request{Prompt: c.InputIDs[:c.Prompt], MaxTokens: len(c.Greedy)}})

	// The smallest pages that hold every slot, so requests take new pages
	// often as they grow and the pool runs out mid-request.
	pageBytes := 0
	for _, s := range m.CacheSpecs() {
		pageBytes = max(pageBytes, s.SlotBytes)
	}
	cfg := Config{MaxBatchTokens: opt.Budget, MaxSeqs: 16, PageBytes: pageBytes, EOS: -1, Pages: opt.Pages, StepTarget: opt.StepTarget}
	if cfg.Pages <= 0 {
		pagesFor := func(n int) int { return cache.TotalPages(m.CacheSpecs(), n, pageBytes) }
		largest := 0
		for _, j := range jobs {
			largest = max(largest, pagesFor(len(j.req.Prompt)+j.req.MaxTokens))
		}
		cfg.Pages = largest + pagesFor(c.Prompt)
	}
	e, err := New(m, cfg)
	if err != nil {
		return nil, err
	}
	streams := make([]*Stream, len(jobs))
	submit := func(i int) error {
		j := jobs[i]
		if j.got != nil {
			got := j.got
			j.req.OnLogits = func(p int, l []float32) { got[p] = append([]float32(nil), l...) }
		}
		s, err := e.Submit(ctx, j.req)
		streams[i] = s
		return err
	}
	// Arrivals: two at once, then one more every other step.
	next := 0
	for ; next < 2; next++ {
		if err := submit(next); err != nil {
			return nil, err
		}
	}
	for step := 0; next < len(jobs) || !e.Idle(); step++ {
		if step%2 == 1 && next < len(jobs) {
			if err := submit(next); err != nil {
				return nil, err
			}
			next++
		}
		if _, err := e.Step(ctx); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	st0 := e.Stats()
	rep := &BatchedReport{PoolPages: cfg.Pages, PagesLeft: st0.PagesTotal - st0.PagesFree - st0.PrefixPages}
	st := e.Stats()
	rep.Preemptions, rep.MaxBatchSeqs, rep.Steps = st.Preemptions, st.MaxBatchSeqs, st.Steps
	for i, j := range jobs {
		toks, last, err := streams[i].Collect(ctx)
		if err != nil {
			return nil, fmt.Errorf("engine: %s: %w", j.name, err)
		}
		r := RequestResult{Name: j.name, MaxAbs: -1, Finished: last.Finish, Tolerance: c.Tolerance}
		if j.greedy {
			r.Tokens, r.Want = toks, c.Greedy
		} else {
			r.MaxAbs = 0
			for p := range j.n {
				row, ok := j.got[p]
				if !ok {
					return nil, fmt.Errorf("engine: %s: no logits for position %d", j.name, p)
				}
				r.MaxAbs = max(r.MaxAbs, golden.MaxAbsDiff(row, j.want[p*V:(p+1)*V]))
			}
		}
		rep.Requests = append(rep.Requests, r)
	}
	return rep, nil
}
