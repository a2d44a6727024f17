package deepseekv4

import (
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/safetensors"
)

// Batch, Span and the logits modes are the engine's; aliases keep the forward
// pass readable.
type (
	Batch = model.Batch
	Span  = model.Span
)

var _ model.Model = (*Model)(nil)

// Model is a loaded DeepSeek-V4 checkpoint ready to run on a compute backend.
// Forward and Draft must not be called concurrently (with themselves or
// each other); everything else may be.
type Model struct {
	Cfg *Config
	// W is the bound checkpoint; w is the same weights as the backend
	// holds them, with the ops' arguments assembled.
	W  *Weights
	w  *resident
	be compute.Backend
	// multi is be's optional MatMuls, nil when it has none (findOps:
	// asserted once, not per step).
	multi compute.MultiMatMul
	// br and pf are be's optional branches and prefetch (branches.go).
	br compute.Branches
	pf compute.Prefetcher
	// nr is be's optional RMSNormRoPE (normRoPE), sub its Submit, ch its
	// GroupedMatMulThen (the output projections).
	nr  compute.NormedRoPE
	sub compute.Submitter
	ch  compute.ChainedLinear
	// fm is be's optional fused mHC (HCPostPreNorm): each site's pre
	// starts as the site before it writes its output back.
	fm     compute.FusedMixing
	ck     *safetensors.Checkpoint
	rope   ropeTables
	hcp    compute.HCParams
	layout *cacheLayout
	// fingerprint identifies the checkpoint (config and tensor inventory).
	fingerprint string
	// mtpLayout maps the MTP layers' kinds (MTPCacheSpecs).
	mtpLayout *cacheLayout
	// The host buffers of Forward and of the MTP layer, and the ops'
	// argument structs, reused pass to pass.
	fwd, mtp passBufs
	args     opArgs
	// ep is set on the ranks of a Parallel model: the MoE layers run
	// expert-parallel through it (nil: on this backend alone).
	ep *epRank
}

// Arch is DeepSeek-V4 for a model.Registry.
var Arch = model.Architecture{
	Name:          "deepseek-v4",
	ModelTypes:    []string{"deepseek_v4"},
	Architectures: []string{"DeepseekV4ForCausalLM"},
	Load: func(dir string, be compute.Backend, o model.Options) (model.Model, error) {
		return LoadWith(dir, be, o)
	},
	Describe: Describe,
}

// Load reads dir/config.json and the checkpoint in dir (model.safetensors, or
// shards listed by model.safetensors.index.json) and binds the weights, with
// default options (a float32 cache).
func Load(dir string, be compute.Backend) (*Model, error) { return LoadWith(dir, be, model.Options{}) }

// LoadWith is Load with options.
func LoadWith(dir string, be compute.Backend, o model.Options) (*Model, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	m, err := New(cfg, ck, be, o)
	if err != nil {
		ck.Close()
		return nil, err
	}
	return m, nil
}

// New binds an open checkpoint to cfg. The model takes ownership of ck.
func New(cfg *Config, ck *safetensors.Checkpoint, be compute.Backend, o model.Options) (*Model, error) {
	w, err := Bind(cfg, ck)
	if err != nil {
		return nil, err
	}
	return newBound(cfg, ck, w, be, o)
}

// newBound is New for weights already bound.
func newBound(cfg *Config, ck *safetensors.Checkpoint, w *Weights, be compute.Backend, o model.Options) (*Model, error) {
	lay, err := newCacheLayout(cfg, cfg.CacheSpecs(o.CacheDType), len(cfg.Layers), o.CacheDType)
	if err != nil {
		return nil, err
	}
	mtpLay, err := newCacheLayout(cfg, cfg.MTPCacheSpecs(o.CacheDType), len(cfg.MTP), o.CacheDType)
	if err != nil {
		return nil, err
	}
	r, err := makeResident(be, cfg, w)
	if err != nil {
		return nil, err
	}
	rope, err := newRopeTables(be, cfg)
	if err != nil {
		return nil, err
	}
	hcp := compute.HCParams{HC: cfg.HCMult, D: cfg.Hidden, NormEps: float32(cfg.RMSEps), Eps: float32(cfg.HCEps), SinkhornIters: cfg.SinkhornIters}
	m := &Model{Cfg: cfg, W: w, w: r, be: be, ck: ck, rope: rope, hcp: hcp, layout: lay, mtpLayout: mtpLay, fingerprint: fingerprint(cfg, ck)}
	m.findOps()
	return m, nil
}

// Backend is the backend the model runs on.
func (m *Model) Backend() compute.Backend { return m.be }

// Info implements model.Model.
func (m *Model) Info() model.Info {
	return model.Info{Arch: Arch.Name, Layers: len(m.Cfg.Layers), Hidden: m.Cfg.Hidden, BOS: int32(m.Cfg.BOS), EOS: int32(m.Cfg.EOS), MaxContext: m.Cfg.MaxPosition}
}

// Close releases the checkpoint mapping. The model must not be used afterwards.
func (m *Model) Close() error {
	if m.ck == nil {
		return nil
	}
	err := m.ck.Close()
	m.ck = nil
	return err
}

// CacheSpecs are the cache kinds one sequence holds, as the CPU engine stores
// them (float32).
func (m *Model) CacheSpecs() []cache.Spec { return m.layout.specs }

// NewSeq takes a new sequence's fixed pages from pool.
func (m *Model) NewSeq(pool *cache.Pool) (*cache.Seq, error) {
	return cache.NewSeq(pool, m.layout.specs)
}

// VocabSize is the number of logits per position.
func (m *Model) VocabSize() int { return m.Cfg.VocabSize }

// validate checks the batch before anything is computed or cached.
func (m *Model) validate(b *Batch) error {
	covered := 0
	var seen map[*cache.Seq]bool // for large batches; small ones are searched
	if len(b.Spans) > 64 {
		seen = make(map[*cache.Seq]bool, len(b.Spans))
	}
	for i, s := range b.Spans {
		if s.Seq == nil {
			return fmt.Errorf("deepseekv4: span %d has no sequence", i)
		}
		if seen != nil {
			if seen[s.Seq] {
				return fmt.Errorf("deepseekv4: span %d: sequence appears twice in one batch", i)
			}
			seen[s.Seq] = true
		} else {
			for _, o := range b.Spans[:i] {
				if o.Seq == s.Seq {
					return fmt.Errorf("deepseekv4: span %d: sequence appears twice in one batch", i)
				}
			}
		}
		if s.Len <= 0 || s.Start != covered || s.Start+s.Len > len(b.Tokens) {
			return fmt.Errorf("deepseekv4: span %d covers tokens [%d,%d) of %d; spans must tile the batch in order", i, s.Start, s.Start+s.Len, len(b.Tokens))
		}
		covered += s.Len
		if end := s.Seq.Len() + s.Len; end > m.Cfg.MaxPosition {
			return fmt.Errorf("deepseekv4: span %d reaches position %d, beyond the model's %d", i, end, m.Cfg.MaxPosition)
		}
	}
	if covered != len(b.Tokens) {
		return fmt.Errorf("deepseekv4: spans cover %d of %d tokens", covered, len(b.Tokens))
	}
	for i, t := range b.Tokens {
		if t < 0 || int(t) >= m.Cfg.VocabSize {
			return fmt.Errorf("deepseekv4: token %d at batch index %d is outside the vocabulary of %d", t, i, m.Cfg.VocabSize)
		}
	}
	return nil
}

// PrefixAlign is where a sequence's state can be restored from a snapshot:
// multiples of every compression rate, where no compressor holds a partial
// window (128 for the released models).
func (m *Model) PrefixAlign() int { return m.Cfg.CompressAlign() }

// Fingerprint identifies the checkpoint: a hash of the resolved config and
// of every tensor's name, dtype, shape and first and last bytes. Two
// processes that load the same checkpoint agree on it; a sequence state is
// only resumed by a model with the same fingerprint.
func (m *Model) Fingerprint() string { return m.fingerprint }

func fingerprint(cfg *Config, ck *safetensors.Checkpoint) string {
	h := sha256.New()
	c := *cfg
	c.Yarn = nil // a pointer would print as an address
	fmt.Fprintf(h, "deepseek-v4 %+v\n", c)
	if cfg.Yarn != nil {
		fmt.Fprintf(h, "%+v\n", *cfg.Yarn)
	}
	for _, n := range ck.Names() {
		t, _ := ck.Tensor(n)
		fmt.Fprintf(h, "%s %s %v ", n, t.DType, t.Shape)
		k := min(len(t.Data), 64)
		h.Write(t.Data[:k])
		h.Write(t.Data[len(t.Data)-k:])
	}
	return fmt.Sprintf("deepseek-v4:%x", h.Sum(nil)[:16])
}

// DecodeReadBytes is what one decode step at context n must read: every
// weight of the main layers except the routed experts, K experts per MoE
// layer, the output head, and the cache entries attention and the indexer
// look at (float32). It is the numerator of the decode speed floor.
func (m *Model) DecodeReadBytes(n int) (weights, kv int64) {
	c := m.Cfg
	add := func(ws ...*compute.Matrix) {
		for _, w := range ws {
			weights += w.Bytes()
		}
	}
	add(m.W.Output, m.W.Head.HCFn)
	for l, L := range m.W.Layers {
		a := &L.Attn
		add(L.HCAttn.Fn, L.HCFFN.Fn, a.WqA, a.WqB, a.Wkv, a.WoB, L.FFN.Gate, L.FFN.Shared.W1, L.FFN.Shared.W2, L.FFN.Shared.W3)
		add(a.WoA...)
		if a.Comp != nil {
			add(a.Comp.Wkv, a.Comp.Wgate)
		}
		if a.Indexer != nil {
			add(a.Indexer.Comp.Wkv, a.Indexer.Comp.Wgate, a.Indexer.WqB, a.Indexer.WeightsProj)
		}
		e := L.FFN.Experts[0]
		weights += int64(c.ExpertsPerTok) * (e.W1.Bytes() + e.W2.Bytes() + e.W3.Bytes())
		d := int64(c.HeadDim) * 4
		kv += int64(c.Window) * d
		switch spec := c.Layers[l]; spec.Attn {
		case HCA:
			kv += int64(n/spec.Rate) * d
		case CSA:
			kv += int64(n/spec.Rate)*int64(c.IndexHeadDim)*4 + int64(min(n/spec.Rate, c.IndexTopK))*d
		}
	}
	return weights, kv
}

// Prefault faults in the checkpoint's pages (see safetensors.Checkpoint.Prefault).
func (m *Model) Prefault(ctx context.Context) error { return m.ck.Prefault(ctx) }

// PrefillFLOPs is the arithmetic of prefilling n tokens in one pass:
// two per weight of every matrix a token goes through (the active experts
// only, the output head for the last position), and the attention
// products over the keys each position sees. It is the numerator of the
// prefill speed floor.
func (m *Model) PrefillFLOPs(n int) float64 {
	c := m.Cfg
	var perTok float64
	mat := func(ws ...*compute.Matrix) {
		for _, w := range ws {
			perTok += 2 * float64(w.Rows) * float64(w.Cols)
		}
	}
	mat(m.W.Head.HCFn)
	var attn float64
	for l, L := range m.W.Layers {
		a := &L.Attn
		mat(L.HCAttn.Fn, L.HCFFN.Fn, a.WqA, a.WqB, a.Wkv, a.WoB, L.FFN.Gate, L.FFN.Shared.W1, L.FFN.Shared.W2, L.FFN.Shared.W3)
		mat(a.WoA...)
		if a.Comp != nil {
			mat(a.Comp.Wkv, a.Comp.Wgate)
		}
		if a.Indexer != nil {
			mat(a.Indexer.Comp.Wkv, a.Indexer.Comp.Wgate, a.Indexer.WqB, a.Indexer.WeightsProj)
		}
		e := L.FFN.Experts[0]
		perTok += float64(c.ExpertsPerTok) * 2 * (float64(e.W1.Rows*e.W1.Cols) + float64(e.W2.Rows*e.W2.Cols) + float64(e.W3.Rows*e.W3.Cols))
		// Keys per position, summed over positions 0..n-1: the window and
		// the compressed entries (the indexer's top-k at most on CSA).
		for p := range n {
			keys := min(p+1, c.Window)
			switch spec := c.Layers[l]; spec.Attn {
			case HCA:
				keys += (p + 1) / spec.Rate
			case CSA:
				keys += min((p+1)/spec.Rate, c.IndexTopK)
				attn += 2 * float64((p+1)/spec.Rate) * float64(c.IndexHeads*c.IndexHeadDim)
			}
			attn += 4 * float64(keys) * float64(c.Heads*c.HeadDim)
		}
	}
	return perTok*float64(n) + attn + 2*float64(m.W.Output.Rows)*float64(m.W.Output.Cols)
}

// findOps looks up the backend's optional ops.
func (m *Model) findOps() {
	m.multi, _ = m.be.(compute.MultiMatMul)
	m.br, _ = m.be.(compute.Branches)
	m.pf, _ = m.be.(compute.Prefetcher)
	m.nr, _ = m.be.(compute.NormedRoPE)
	m.ch, _ = m.be.(compute.ChainedLinear)
	m.sub, _ = m.be.(compute.Submitter)
	m.fm, _ = m.be.(compute.FusedMixing)
}
