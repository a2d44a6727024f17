package deepseekv4

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/comm"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/moe"
	"github.com/strata-inference/strata/safetensors"
)

// Parallel is a DeepSeek-V4 model run by several ranks, one backend each
// (GPUs, or CPU backends in one process), with data-parallel attention and
// expert-parallel MoE layers. It gives the single-device model's logits bit
// for bit: every token is computed by the same ops on the same inputs, and
// its experts' outputs are added in the same order.
//
// # Attention: data parallelism
//
// Each sequence lives on one rank, its home (the rank whose backend holds
// the pool of its cache, cache.Seq.Pool), and that rank runs attention, the
// hyper-connections, the router and the shared expert for its tokens, with
// every dense weight replicated on every rank. Tensor parallelism (heads
// split across ranks) does not fit DeepSeek-V4: its single key-value head
// of 512 channels, shared by all query heads, cannot be split by heads,
// so every rank would hold and update the whole KV cache (window ring,
// compressed entries, indexer keys) and run the compressors and the
// indexer of every token, which are per token, not per head: the cache
// memory and that work would be replicated on every rank, not divided.
// The output projection would also need a cross-rank sum of partial
// products, which changes the order of the float32 sums. With data
// parallelism a request's whole state, the compressors' partial windows
// included, stays in one rank's pool under the same state policies as on
// one device, so prefix snapshots, rollback and hand-off work unchanged,
// and the only traffic between ranks is the MoE layers' dispatch and
// combine.
//
// # MoE: expert parallelism
//
// Each MoE layer's routed experts are placed on the ranks by a
// moe.Placement (contiguous blocks by default, or EPLB's replicas); a
// rank holds the weights of its experts only. See epRank for one layer's
// exchange.
//
// Forward and Draft split the batch by home rank and run every rank's part
// on its own goroutine, each rank taking part in every MoE layer's
// exchanges even when it has no tokens. Cancellation is decided together:
// the ranks vote at the count exchanges and all stop at the same layer.
// A rank that panics aborts the communicator, and the model is unusable
// afterwards.
type Parallel struct {
	Cfg   *Config
	W     *Weights
	ranks []*Model
	eps   []*epRank
	comms []comm.Comm
	place []*moe.Placement
	ck    *safetensors.Checkpoint

	mu     sync.Mutex
	broken error
}

var (
	_ model.Model          = (*Parallel)(nil)
	_ model.Drafter        = (*Parallel)(nil)
	_ model.PrefixAligner  = (*Parallel)(nil)
	_ model.Fingerprinter  = (*Parallel)(nil)
	_ model.Prefaulter     = (*Parallel)(nil)
	_ model.DecodeReader   = (*Parallel)(nil)
	_ model.PrefillCounter = (*Parallel)(nil)
)

// ParallelOptions configure a Parallel model.
type ParallelOptions struct {
	model.Options
	// Placements has one entry per MoE layer (the main layers, then the
	// MTP layers): where its routed experts live. A nil slice or entry
	// places that layer in contiguous blocks.
	Placements []*moe.Placement
}

// LoadParallel reads the checkpoint in dir (as Load does) and binds it to
// the ranks: bes[r] and comms[r] are rank r's backend and communicator end.
func LoadParallel(dir string, bes []compute.Backend, comms []comm.Comm, o ParallelOptions) (*Parallel, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	p, err := NewParallel(cfg, ck, bes, comms, o)
	if err != nil {
		ck.Close()
		return nil, err
	}
	return p, nil
}

// NewParallel binds an open checkpoint to the ranks (see LoadParallel).
// The model takes ownership of ck. Every backend must offer
// compute.RoutedExperts.
func NewParallel(cfg *Config, ck *safetensors.Checkpoint, bes []compute.Backend, comms []comm.Comm, o ParallelOptions) (*Parallel, error) {
	N := len(bes)
	if N == 0 || len(comms) != N {
		return nil, fmt.Errorf("deepseekv4: %d backends and %d communicator ends", N, len(comms))
	}
	for r, c := range comms {
		if c == nil || c.Rank() != r || c.Size() != N {
			return nil, fmt.Errorf("deepseekv4: communicator end %d is not rank %d of %d", r, r, N)
		}
	}
	w, err := Bind(cfg, ck)
	if err != nil {
		return nil, err
	}
	nMoE := len(cfg.Layers) + len(cfg.MTP)
	if o.Placements != nil && len(o.Placements) != nMoE {
		return nil, fmt.Errorf("deepseekv4: %d placements for %d MoE layers (%d main, %d MTP)", len(o.Placements), nMoE, len(cfg.Layers), len(cfg.MTP))
	}
	place := make([]*moe.Placement, nMoE)
	for i := range place {
		if o.Placements != nil && o.Placements[i] != nil {
			place[i] = o.Placements[i]
		} else if place[i], err = moe.Block(cfg.Experts, N); err != nil {
			return nil, fmt.Errorf("deepseekv4: %w", err)
		}
		if err := place[i].Validate(cfg.Experts); err != nil {
			return nil, fmt.Errorf("deepseekv4: MoE layer %d: %w", i, err)
		}
		if place[i].Ranks != N {
			return nil, fmt.Errorf("deepseekv4: MoE layer %d is placed on %d ranks, the model runs on %d", i, place[i].Ranks, N)
		}
	}
	lay, err := newCacheLayout(cfg, cfg.CacheSpecs(o.CacheDType), len(cfg.Layers), o.CacheDType)
	if err != nil {
		return nil, err
	}
	mtpLay, err := newCacheLayout(cfg, cfg.MTPCacheSpecs(o.CacheDType), len(cfg.MTP), o.CacheDType)
	if err != nil {
		return nil, err
	}
	hcp := compute.HCParams{HC: cfg.HCMult, D: cfg.Hidden, NormEps: float32(cfg.RMSEps), Eps: float32(cfg.HCEps), SinkhornIters: cfg.SinkhornIters}
	fp := fingerprint(cfg, ck)
	p := &Parallel{Cfg: cfg, W: w, comms: comms, place: place, ck: ck}
	for r, be := range bes {
		split, ok := be.(compute.RoutedExperts)
		if !ok {
			return nil, fmt.Errorf("deepseekv4: expert parallelism needs the backend's compute.RoutedExperts (Route, RunExperts, Combine); rank %d's backend %s does not offer it", r, be.Name())
		}
		res, err := makeResident(be, cfg, shardWeights(w, place, r))
		if err != nil {
			return nil, fmt.Errorf("deepseekv4: rank %d: %w", r, err)
		}
		rope, err := newRopeTables(be, cfg)
		if err != nil {
			return nil, fmt.Errorf("deepseekv4: rank %d: %w", r, err)
		}
		m := &Model{Cfg: cfg, W: w, w: res, be: be, rope: rope, hcp: hcp, layout: lay, mtpLayout: mtpLay, fingerprint: fp}
		m.findOps()
		e := &epRank{rank: r, size: N, comm: comms[r], be: be, split: split, hidden: cfg.Hidden,
			layers: map[*compute.MoEArgs]*epLayer{}, load: make([][]int64, nMoE), freq: make([]int64, cfg.VocabSize)}
		hashAt := 0
		add := func(i int, L *rLayer, tid []int32) *epLayer {
			el := &epLayer{index: i, args: &L.moe, place: place[i], k: cfg.ExpertsPerTok, tid: tid, hashAt: -1}
			if tid != nil {
				el.hashAt = hashAt
				hashAt++
			}
			e.layers[&L.moe] = el
			e.load[i] = make([]int64, cfg.Experts)
			return el
		}
		for l := range res.layers {
			e.main = append(e.main, add(l, &res.layers[l], w.Layers[l].FFN.Tid2Eid))
		}
		for k := range res.mtp {
			e.mtp = append(e.mtp, []*epLayer{add(len(res.layers)+k, &res.mtp[k].block, w.MTP[k].Block.FFN.Tid2Eid)})
		}
		m.ep = e
		p.ranks = append(p.ranks, m)
		p.eps = append(p.eps, e)
	}
	return p, nil
}

// shardWeights is w with, in every MoE layer, only the routed experts
// rank r holds (the others' matrices nil, so that they are not made
// resident on r's backend).
func shardWeights(w *Weights, place []*moe.Placement, r int) *Weights {
	local := func(ex []Expert, p *moe.Placement) []Expert {
		out := make([]Expert, len(ex))
		for e := range ex {
			if p.Holds(r, e) {
				out[e] = ex[e]
			}
		}
		return out
	}
	c := *w
	c.Layers = slices.Clone(w.Layers)
	for l := range c.Layers {
		c.Layers[l].FFN.Experts = local(w.Layers[l].FFN.Experts, place[l])
	}
	c.MTP = slices.Clone(w.MTP)
	for k := range c.MTP {
		c.MTP[k].Block.FFN.Experts = local(w.MTP[k].Block.FFN.Experts, place[len(w.Layers)+k])
	}
	return &c
}

// Ranks is the number of ranks.
func (p *Parallel) Ranks() int { return len(p.ranks) }

// RankBackends are the ranks' backends: a sequence whose pool is in rank
// r's backend has rank r for its home.
func (p *Parallel) RankBackends() []compute.Backend {
	out := make([]compute.Backend, len(p.ranks))
	for r, m := range p.ranks {
		out[r] = m.be
	}
	return out
}

// Placements are the MoE layers' placements (main layers, then MTP).
func (p *Parallel) Placements() []*moe.Placement { return slices.Clone(p.place) }

// Stats returns every rank's expert-parallel counters.
func (p *Parallel) Stats() []EPStats {
	out := make([]EPStats, len(p.eps))
	for r, e := range p.eps {
		out[r] = e.stats
	}
	return out
}

// Loads is the traffic the model has seen, for EPLB: per MoE layer (main
// layers, then MTP) the (token, k) pairs routed to each expert, and per
// token id how many times it went through the main passes (the hash
// layers' load follows from it: moe.HashLoad).
func (p *Parallel) Loads() (experts [][]int64, tokens []int64) {
	experts = make([][]int64, len(p.place))
	for i := range experts {
		experts[i] = make([]int64, p.Cfg.Experts)
	}
	tokens = make([]int64, p.Cfg.VocabSize)
	for _, e := range p.eps {
		for i, l := range e.load {
			for x, n := range l {
				experts[i][x] += n
			}
		}
		for t, n := range e.freq {
			tokens[t] += n
		}
	}
	return experts, tokens
}

// Backend implements model.Model: rank 0's backend (the pool a caller
// makes there holds sequences homed on rank 0).
func (p *Parallel) Backend() compute.Backend { return p.ranks[0].be }

// CacheSpecs implements model.Model: as on one device, per rank.
func (p *Parallel) CacheSpecs() []cache.Spec { return p.ranks[0].CacheSpecs() }

// NewSeq implements model.Model: the sequence's home is the rank whose
// backend holds pool.
func (p *Parallel) NewSeq(pool *cache.Pool) (*cache.Seq, error) {
	if _, err := p.rankOf(pool); err != nil {
		return nil, err
	}
	return p.ranks[0].NewSeq(pool)
}

// Info implements model.Model.
func (p *Parallel) Info() model.Info { return p.ranks[0].Info() }

// VocabSize implements model.Model.
func (p *Parallel) VocabSize() int { return p.Cfg.VocabSize }

// Close implements model.Model: it releases the checkpoint mapping (the
// communicators belong to the caller).
func (p *Parallel) Close() error {
	if p.ck == nil {
		return nil
	}
	err := p.ck.Close()
	p.ck = nil
	return err
}

// DraftSpecs implements model.Drafter.
func (p *Parallel) DraftSpecs() []cache.Spec { return p.ranks[0].DraftSpecs() }

// DraftWindow implements model.Drafter.
func (p *Parallel) DraftWindow() int { return p.ranks[0].DraftWindow() }

// PrefixAlign implements model.PrefixAligner.
func (p *Parallel) PrefixAlign() int { return p.ranks[0].PrefixAlign() }

// Fingerprint implements model.Fingerprinter: the checkpoint's, as on one
// device (a state handed off by a single-device engine resumes here).
func (p *Parallel) Fingerprint() string { return p.ranks[0].Fingerprint() }

// Prefault implements model.Prefaulter.
func (p *Parallel) Prefault(ctx context.Context) error { return p.ck.Prefault(ctx) }

// PrefillFLOPs implements model.PrefillCounter: the whole model's, over
// all ranks.
func (p *Parallel) PrefillFLOPs(n int) float64 { return p.ranks[0].PrefillFLOPs(n) }

// DecodeReadBytes implements model.DecodeReader for one rank: at batch 1
// a rank reads every dense weight (replicated) and, on average, its share
// 1/N of the token's K experts per layer, and the token's cache if it is
// the token's home.
func (p *Parallel) DecodeReadBytes(n int) (weights, kv int64) {
	w, kv := p.ranks[0].DecodeReadBytes(n)
	var experts int64
	for _, L := range p.W.Layers {
		e := L.FFN.Experts[0]
		experts += int64(p.Cfg.ExpertsPerTok) * (e.W1.Bytes() + e.W2.Bytes() + e.W3.Bytes())
	}
	return w - experts + experts/int64(len(p.ranks)), kv
}

// rankOf is the home rank of the sequences in pool.
func (p *Parallel) rankOf(pool *cache.Pool) (int, error) {
	for r, m := range p.ranks {
		if pool.Backend() == m.be {
			return r, nil
		}
	}
	return 0, fmt.Errorf("deepseekv4: a pool on %s, which is none of the %d ranks' backends", pool.Backend().Name(), len(p.ranks))
}

// usable reports why the model cannot run (a rank failed for good).
func (p *Parallel) usable() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken != nil {
		return fmt.Errorf("deepseekv4: the parallel model is unusable after an earlier failure: %w", p.broken)
	}
	return nil
}

// Forward implements model.Model: every rank runs its sequences' spans,
// and the logits come back in span order.
func (p *Parallel) Forward(ctx context.Context, b *Batch) ([]float32, error) {
	return p.run(ctx, b, -1)
}

// Draft implements model.Drafter with the first MTP layer, its spans'
// draft states split by home rank as Forward splits sequences.
func (p *Parallel) Draft(ctx context.Context, b *Batch) ([]float32, error) {
	if len(p.W.MTP) == 0 {
		return nil, fmt.Errorf("deepseekv4: the checkpoint has no MTP layer")
	}
	return p.run(ctx, b, 0)
}

// run is Forward (mtp < 0) or MTP layer mtp's Draft over b.
func (p *Parallel) run(ctx context.Context, b *Batch, mtp int) ([]float32, error) {
	if err := p.usable(); err != nil {
		return nil, err
	}
	if err := p.ranks[0].validate(b); err != nil {
		return nil, err
	}
	N := len(p.ranks)
	subs := make([]*Batch, N)
	for r := range subs {
		subs[r] = &Batch{}
	}
	home := make([]int, len(b.Spans))
	for i, s := range b.Spans {
		r, err := p.rankOf(s.Seq.Pool())
		if err != nil {
			return nil, fmt.Errorf("deepseekv4: span %d: %w", i, err)
		}
		if s.Draft != nil {
			if rd, err := p.rankOf(s.Draft.Pool()); err != nil || rd != r {
				return nil, fmt.Errorf("deepseekv4: span %d: the draft state is not on the sequence's rank %d", i, r)
			}
		}
		// Reserve every span first, so that a short pool fails the step
		// before any rank computes (as Forward does on one device).
		if err := s.Seq.Reserve(s.Seq.Len() + s.Len); err != nil {
			return nil, fmt.Errorf("deepseekv4: span %d: %w", i, err)
		}
		home[i] = r
		sub := subs[r]
		sub.Spans = append(sub.Spans, Span{Seq: s.Seq, Start: len(sub.Tokens), Len: s.Len, Logits: s.Logits, Draft: s.Draft})
		sub.Tokens = append(sub.Tokens, b.Tokens[s.Start:s.Start+s.Len]...)
	}
	outs := make([][]float32, N)
	errs := make([]error, N)
	var wg sync.WaitGroup
	for r := range N {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[r], errs[r] = p.runRank(ctx, r, subs[r], mtp)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		for _, e := range errs {
			if e != nil {
				return nil, err
			}
		}
	}
	for r, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("deepseekv4: rank %d of %d: %w", r, N, err)
		}
	}
	V := p.Cfg.VocabSize
	logits := make([]float32, 0, b.LogitRows()*V)
	at := make([]int, N)
	for i, s := range b.Spans {
		r := home[i]
		n := (&Batch{Spans: []Span{s}}).LogitRows() * V
		logits = append(logits, outs[r][at[r]:at[r]+n]...)
		at[r] += n
	}
	return logits, nil
}

// runRank is rank r's part of a pass: its spans through its replica of
// the model (its MoE layers expert-parallel), or, without spans, every
// MoE layer's exchanges with no tokens of its own.
func (p *Parallel) runRank(ctx context.Context, r int, sub *Batch, mtp int) (out []float32, err error) {
	m, e := p.ranks[r], p.eps[r]
	pass := e.main
	if mtp >= 0 {
		pass = e.mtp[mtp]
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
			p.comms[r].Abort(err)
			p.mu.Lock()
			if p.broken == nil {
				p.broken = fmt.Errorf("rank %d: %w", r, err)
			}
			p.mu.Unlock()
		}
	}()
	rctx := e.begin(ctx, pass, sub.Tokens)
	if len(sub.Spans) > 0 {
		if mtp < 0 {
			out, err = m.Forward(rctx, sub)
		} else {
			out, err = m.mtpForward(rctx, mtp, sub, nil)
		}
	} else {
		m.be.ResetScratch(0)
	}
	if eerr := e.end(); eerr != nil {
		err = eerr
	}
	return out, err
}
