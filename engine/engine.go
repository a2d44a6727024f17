// Package engine serves many requests at once on one model: continuous
// batching with chunked prefill under a per-step token budget, admission by
// the pages a request's cache needs (growing and fixed), preemption by
// recomputation when the pool runs out, cancellation at any point, and
// per-request sampling that does not depend on the rest of the batch.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model"
)

// Config sizes the engine.
type Config struct {
	// MaxBatchTokens is the per-step token budget: decode tokens plus prefill
	// chunks. Prompts longer than what is left are prefilled in chunks.
	MaxBatchTokens int
	// MaxSeqs is the most sequences in one step.
	MaxSeqs int
	// StepTarget, when set, schedules for latency: decodes first, and the
	// prompt tokens of a step sized by the measured step cost to take about
	// this long, shared between the prompts being prefilled (so a long
	// prompt neither stalls running streams nor keeps a short one waiting).
	// Zero schedules first come, first served under MaxBatchTokens.
	StepTarget time.Duration
	// PageBytes and Pages size the cache pool.
	PageBytes, Pages int
	// MaxContext bounds prompt plus generated tokens (0: no bound beyond the pool).
	MaxContext int
	// EOS ends a request unless it sets IgnoreEOS (negative: none).
	EOS int32
	// Speculation is the default speculative decoding of requests that do
	// not set their own (off when Method is empty).
	Speculation Speculation
	// NoPrefixCache turns off prefix caching (snapshots of sequence state at
	// aligned positions, restored for requests that share the prefix).
	NoPrefixCache bool
	Logger        *slog.Logger
}

// Request is one generation request.
type Request struct {
	Prompt    []int32
	MaxTokens int // tokens to generate (at least 1)
	Sampling  Sampling
	// Stop ends the request when one of these tokens is generated (the token
	// is emitted).
	Stop      []int32
	IgnoreEOS bool
	// MinTokens keeps EOS and the Stop tokens from being generated until
	// this many tokens have been (their logits are -Inf until then); at
	// most MaxTokens.
	MinTokens int
	// WantLogprobs attaches the log-probability of each token, and with
	// Logprobs > 0 the Logprobs most likely alternatives.
	WantLogprobs bool
	Logprobs     int
	// Forced, when set, replaces sampling: the i-th generated token is
	// Forced[i] (teacher forcing, for checking a path against reference
	// logits). MaxTokens is then len(Forced)+1 at most.
	Forced []int32
	// OnLogits, when set, receives the logits of every position the request
	// computes (prompt and generated), possibly more than once for a
	// position recomputed after preemption. It runs on the engine's
	// goroutine and must not retain the slice.
	OnLogits func(pos int, logits []float32)
	// Speculation overrides the engine's speculative decoding for this
	// request (Method SpecOff turns it off).
	Speculation *Speculation
	// Handoff ends the request after its first generated token: the last
	// event (FinishHandoff) carries the request's whole state, which
	// another engine resumes (Resume).
	Handoff bool
	// Constraint, when set, restricts the generated tokens to those it
	// allows (structured output); see Constraint for what it implies.
	Constraint Constraint
}

// FinishReason says why a request ended.
type FinishReason string

const (
	FinishStop      FinishReason = "stop"      // a stop token or EOS
	FinishLength    FinishReason = "length"    // MaxTokens reached
	FinishCancelled FinishReason = "cancelled" // the request's context ended
	FinishError     FinishReason = "error"     // the forward pass or the constraint failed (Event.Err says why)
)

// TokenLogprob is a token and its log-probability under the model.
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

// Event is one step of a request's output: a token, and on the last event the
// reason it finished (and the error, for FinishError and FinishCancelled).
type Event struct {
	Token   int32
	Logprob float32
	Top     []TokenLogprob
	Finish  FinishReason // empty until the last event
	Err     error
	// Tokens counts prompt and output tokens when the event was made.
	PromptTokens, OutputTokens int
	// CachedTokens is how many prompt tokens the request's first admission
	// restored from the prefix cache instead of computing them (0 before
	// admission and without a hit); recomputation after a preemption does
	// not change it.
	CachedTokens int
	// Handoff is the state of a FinishHandoff event's request, in this
	// engine's pool until written or closed (the receiver must do one).
	Handoff *Handoff
}

// ErrOverloaded is returned by Submit when the queue is full.
var ErrOverloaded = errors.New("engine: queue full")

// Engine runs requests on one model. Its methods are safe for concurrent use;
// one goroutine calls Run (or Step).
type Engine struct {
	m     model.Model
	pool  *cache.Pool   // pools[0]
	pools []*cache.Pool // one per rank (ranks.go)
	cfg   Config
	log   *slog.Logger

	mu       sync.Mutex
	waiting  []*seq // by arrival; preempted sequences return here
	running  []*seq // by arrival
	nextID   uint64
	wake     chan struct{}
	maxQueue int
	stats    Stats
	prefix   *prefixCache // nil when off or the model cannot restore state
	maxRing  int          // longest feed a sequence can roll back (0: none)
	// The model's capabilities, found once.
	drafter model.Drafter // nil: no draft head
	fp      string        // the model's fingerprint ("" when it has none)
	cost    costModel     // step times, for choosing draft lengths
	stepped chan struct{} // closed after Run's next step (nil: nobody waits)
}

// Stats are the engine's counters.
type Stats struct {
	Waiting, Running                     int
	PromptTokens, OutTokens              int64 // processed prompt tokens (recomputations included) and generated tokens
	Steps, Preemptions                   int64
	MaxBatchSeqs                         int   // the most sequences one step has held
	PrefixHitTokens                      int64 // prompt tokens restored from prefix snapshots instead of computed
	PrefixSnapshots                      int   // snapshots held now
	PrefixPages                          int   // pool pages they hold beyond those of running requests
	SpecSteps, SpecDrafted, SpecAccepted int64 // speculative verifications, tokens drafted, drafts accepted
	// StepSeconds and TokenSeconds model a forward pass of T tokens as taking
	// StepSeconds + T·TokenSeconds; DraftSeconds is one MTP drafting pass.
	StepSeconds, TokenSeconds, DraftSeconds float64
	Finished, Cancelled                     int64
	PagesUsed                               map[string]int
	PagesFree, PagesTotal                   int
}

// New makes an engine for m with a pool of cfg.Pages pages.
func New(m model.Model, cfg Config) (*Engine, error) {
	if cfg.MaxBatchTokens <= 0 {
		cfg.MaxBatchTokens = 512
	}
	if cfg.MaxSeqs <= 0 {
		cfg.MaxSeqs = 64
	}
	if cfg.PageBytes <= 0 {
		cfg.PageBytes = cache.PageBytesFor(m.CacheSpecs())
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	for _, s := range m.CacheSpecs() {
		if err := s.Validate(cfg.PageBytes); err != nil {
			return nil, err
		}
	}
	pools, err := newPools(m, cfg.PageBytes, cfg.Pages)
	if err != nil {
		return nil, err
	}
	e := &Engine{m: m, pool: pools[0], pools: pools, cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1), maxQueue: 1 << 16}
	if d, ok := m.(model.Drafter); ok && len(d.DraftSpecs()) > 0 {
		e.drafter = d
	}
	if f, ok := m.(model.Fingerprinter); ok {
		e.fp = f.Fingerprint()
	}
	if a, ok := m.(model.PrefixAligner); ok && !cfg.NoPrefixCache && a.PrefixAlign() > 0 {
		e.prefix = newPrefixCache(a.PrefixAlign())
	}
	e.maxRing = minRing(m, e.drafter)
	if _, err := e.resolveSpec(&Request{}); err != nil {
		return nil, err
	}
	return e, nil
}

// SetMaxQueue bounds the requests waiting for admission; Submit returns
// ErrOverloaded beyond it.
func (e *Engine) SetMaxQueue(n int) {
	e.mu.Lock()
	e.maxQueue = n
	e.mu.Unlock()
}

// EOS is the token that ends a request unless it ignores EOS (negative: none).
func (e *Engine) EOS() int32 { return e.cfg.EOS }

// Pool is the engine's cache pool (rank 0's for a RankedModel: see Pools).
func (e *Engine) Pool() *cache.Pool { return e.pool }

// Model is the engine's model.
func (e *Engine) Model() model.Model { return e.m }

// PagesFor is how many pages a request of n tokens of context holds.
func (e *Engine) PagesFor(n int) int { return cache.TotalPages(e.m.CacheSpecs(), n, e.cfg.PageBytes) }

// Submit queues a request. Its output arrives on the returned Stream; the
// request is cancelled when ctx ends. Submit fails at once for a request
// that can never run: bad tokens or parameters, or a context larger than the
// model or the whole pool.
func (e *Engine) Submit(ctx context.Context, r Request) (*Stream, error) {
	if len(r.Prompt) == 0 {
		return nil, fmt.Errorf("engine: empty prompt")
	}
	if r.MaxTokens <= 0 {
		return nil, fmt.Errorf("engine: max tokens %d must be at least 1", r.MaxTokens)
	}
	if r.Forced != nil && r.MaxTokens > len(r.Forced)+1 {
		r.MaxTokens = len(r.Forced) + 1
	}
	if err := r.Sampling.Validate(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if err := checkConstraint(&r); err != nil {
		return nil, err
	}
	if r.Logprobs < 0 || r.Logprobs > 20 {
		return nil, fmt.Errorf("engine: logprobs %d must be in [0, 20]", r.Logprobs)
	}
	V := e.m.VocabSize()
	for i, t := range r.Prompt {
		if t < 0 || int(t) >= V {
			return nil, fmt.Errorf("engine: prompt token %d at %d is outside the vocabulary of %d", t, i, V)
		}
	}
	for _, t := range r.Stop {
		if t < 0 || int(t) >= V {
			return nil, fmt.Errorf("engine: stop token %d is outside the vocabulary of %d", t, V)
		}
	}
	for t := range r.Sampling.LogitBias {
		if t < 0 || int(t) >= V {
			return nil, fmt.Errorf("engine: logit bias token %d is outside the vocabulary of %d", t, V)
		}
	}
	if r.MinTokens < 0 || r.MinTokens > r.MaxTokens {
		return nil, fmt.Errorf("engine: min tokens %d must be in [0, max tokens %d]", r.MinTokens, r.MaxTokens)
	}
	total := len(r.Prompt) + r.MaxTokens
	if e.cfg.MaxContext > 0 && total > e.cfg.MaxContext {
		return nil, fmt.Errorf("engine: prompt of %d tokens plus %d to generate exceeds the context of %d", len(r.Prompt), r.MaxTokens, e.cfg.MaxContext)
	}
	if need := e.PagesFor(total - 1); need > e.pool.NumPages() {
		return nil, fmt.Errorf("engine: a context of %d tokens needs %d cache pages; the pool has %d", total, need, e.pool.NumPages())
	}
	if r.Sampling.Seed == 0 {
		r.Sampling.Seed = uint64(time.Now().UnixNano())
	}
	spec, err := e.resolveSpec(&r)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if len(e.waiting) >= e.maxQueue {
		e.mu.Unlock()
		return nil, ErrOverloaded
	}
	e.nextID++
	s := &seq{
		id:      e.nextID,
		ctx:     ctx,
		req:     r,
		tokens:  append([]int32(nil), r.Prompt...),
		prompt:  len(r.Prompt),
		sampler: newSampler(r.Sampling, r.Prompt),
		stream:  newStream(e.nextID),
		spec:    spec,
	}
	e.holdStops(s.sampler, &r)
	e.waiting = append(e.waiting, s)
	e.mu.Unlock()
	context.AfterFunc(ctx, e.poke)
	e.poke()
	return s.stream, nil
}

// holdStops makes smp keep the tokens that would end r (EOS, unless
// ignored, and r.Stop) from being drawn before r.MinTokens are generated.
func (e *Engine) holdStops(smp *sampler, r *Request) {
	if r.MinTokens == 0 {
		return
	}
	ids := slices.Clone(r.Stop)
	if e.cfg.EOS >= 0 && !r.IgnoreEOS {
		ids = append(ids, e.cfg.EOS)
	}
	smp.hold(r.MinTokens, ids)
}

// poke wakes Run.
func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run steps the engine until ctx ends, sleeping while there is no work.
// When ctx ends, every request still queued or running is cancelled.
func (e *Engine) Run(ctx context.Context) error {
	for {
		worked, err := e.Step(ctx)
		if err != nil && ctx.Err() == nil {
			e.log.Error("engine step failed", "err", err)
		}
		if ctx.Err() != nil {
			e.cancelAll(ctx.Err())
			e.signalStep()
			return ctx.Err()
		}
		e.signalStep()
		if !worked {
			select {
			case <-ctx.Done():
			case <-e.wake:
			}
		}
	}
}

// Stepped returns a channel that is closed when Run has finished its next
// step, whether or not the step had work (a step with none still drops
// cancelled requests), and when Run returns. Callers that wait for the
// engine to reach a state check it, then wait on the channel they got
// before checking, and check again.
func (e *Engine) Stepped() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stepped == nil {
		e.stepped = make(chan struct{})
	}
	return e.stepped
}

func (e *Engine) signalStep() {
	e.mu.Lock()
	if e.stepped != nil {
		close(e.stepped)
		e.stepped = nil
	}
	e.mu.Unlock()
}

// Idle reports whether no request is queued or running.
func (e *Engine) Idle() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.waiting) == 0 && len(e.running) == 0
}

// Stats returns a snapshot of the counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	st := e.stats
	st.Waiting, st.Running = len(e.waiting), len(e.running)
	if e.prefix != nil {
		st.PrefixSnapshots, st.PrefixPages = len(e.prefix.snaps), e.prefixPages(e.liveSeqs())
	}
	st.StepSeconds, st.TokenSeconds = e.cost.line()
	st.DraftSeconds = e.cost.draft
	e.mu.Unlock()
	st.PagesUsed, st.PagesFree, st.PagesTotal = e.poolStats()
	return st
}

func (e *Engine) cancelAll(err error) {
	e.mu.Lock()
	all := append(e.waiting, e.running...)
	e.waiting, e.running = nil, nil
	e.mu.Unlock()
	for _, s := range all {
		s.release()
		s.stream.push(Event{Finish: FinishCancelled, Err: err, PromptTokens: s.prompt, OutputTokens: len(s.tokens) - s.prompt})
		s.stream.close()
	}
}

// liveSeqs is the cache state of the requests that hold some. e.mu must be held.
func (e *Engine) liveSeqs() []*cache.Seq {
	var out []*cache.Seq
	for _, s := range e.running {
		if s.cs != nil {
			out = append(out, s.cs)
		}
	}
	return out
}
