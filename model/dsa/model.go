package dsa

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

var (
	_ model.Model          = (*Model)(nil)
	_ model.PrefixAligner  = (*Model)(nil)
	_ model.Fingerprinter  = (*Model)(nil)
	_ model.Prefaulter     = (*Model)(nil)
	_ model.DecodeReader   = (*Model)(nil)
	_ model.PrefillCounter = (*Model)(nil)
)

// Model is a loaded checkpoint ready to run on a compute backend. Forward
// must not be called concurrently; everything else may be.
type Model struct {
	Cfg *Config
	// W is the bound checkpoint; w is the same weights as the backend
	// holds them, with the ops' arguments assembled.
	W       *Weights
	w       *resident
	be      compute.Backend
	mla     compute.MLA
	gating  compute.Gating
	ck      *safetensors.Checkpoint
	invFreq compute.Tensor // RoPE inverse frequencies [r/2] (MLA and indexer)
	routing compute.Routing
	layout  *cacheLayout
	// fingerprint identifies the checkpoint (config and tensor inventory).
	fingerprint string
}

// Load reads dir/config.json as family f's and the checkpoint in dir
// (model.safetensors, or the shards model.safetensors.index.json lists)
// and binds the weights.
func Load(dir string, be compute.Backend, o model.Options, f *Family) (*Model, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"), f)
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
// The backend must implement compute.MLA and compute.Gating.
func New(cfg *Config, ck *safetensors.Checkpoint, be compute.Backend, o model.Options) (*Model, error) {
	name := cfg.Family.Name
	mla, ok := be.(compute.MLA)
	if !ok {
		return nil, fmt.Errorf("%s: the %s backend has no MLA ops (compute.MLA: latent attention, DSA indexer RoPE, group-limited MoE); run on the CPU backend", name, be.Name())
	}
	gating, ok := be.(compute.Gating)
	if !ok {
		return nil, fmt.Errorf("%s: the %s backend has no dense SwiGLU (compute.Gating); run on the CPU backend", name, be.Name())
	}
	lay, err := newCacheLayout(cfg, o.CacheDType)
	if err != nil {
		return nil, err
	}
	w, err := Bind(cfg, ck)
	if err != nil {
		return nil, err
	}
	r, err := makeResident(be, cfg, w)
	if err != nil {
		return nil, err
	}
	inv, err := be.Vector(invFreqs(cfg.RopeDim, cfg.RopeTheta, cfg.Yarn))
	if err != nil {
		return nil, err
	}
	return &Model{
		Cfg: cfg, W: w, w: r, be: be, mla: mla, gating: gating, ck: ck, invFreq: inv, layout: lay,
		routing:     compute.Routing{Groups: cfg.Groups, TopGroups: cfg.TopGroups, Unnormalized: !cfg.NormTopK},
		fingerprint: fingerprint(cfg, ck),
	}, nil
}

// Backend is the backend the model runs on.
func (m *Model) Backend() compute.Backend { return m.be }

// Info implements model.Model.
func (m *Model) Info() model.Info {
	c := m.Cfg
	return model.Info{Arch: c.Family.Name, Layers: c.NumLayers, Hidden: c.Hidden, BOS: int32(c.BOS), EOS: int32(c.EOS), MaxContext: c.MaxPosition}
}

// Close releases the checkpoint mapping. The model must not be used
// afterwards.
func (m *Model) Close() error {
	if m.ck == nil {
		return nil
	}
	err := m.ck.Close()
	m.ck = nil
	return err
}

// CacheSpecs are the cache kinds one sequence holds (cachespec.go), in the
// format the model was loaded with.
func (m *Model) CacheSpecs() []cache.Spec { return m.layout.specs }

// NewSeq takes a new sequence from pool (append kinds only: no pages
// until the sequence is fed).
func (m *Model) NewSeq(pool *cache.Pool) (*cache.Seq, error) {
	return cache.NewSeq(pool, m.layout.specs)
}

// VocabSize is the number of logits per position.
func (m *Model) VocabSize() int { return m.Cfg.VocabSize }

// PrefixAlign is 1: every kind is append-only, so a sequence's state
// after any number of tokens is restorable from a snapshot taken there.
func (m *Model) PrefixAlign() int { return 1 }

// Fingerprint identifies the checkpoint: a hash of the resolved config
// and of every tensor's name, dtype, shape and first and last bytes. A
// sequence state is only resumed by a model with the same fingerprint.
func (m *Model) Fingerprint() string { return m.fingerprint }

func fingerprint(cfg *Config, ck *safetensors.Checkpoint) string {
	h := sha256.New()
	c := *cfg
	c.Family, c.Yarn = nil, nil // pointers would print as addresses
	fmt.Fprintf(h, "%s %+v\n", cfg.Family.Name, c)
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
	return fmt.Sprintf("%s:%x", cfg.Family.Name, h.Sum(nil)[:16])
}

// Prefault faults in the checkpoint's pages (see safetensors.Checkpoint.Prefault).
func (m *Model) Prefault(ctx context.Context) error { return m.ck.Prefault(ctx) }

// DecodeReadBytes is what one decode step at context n must read: every
// weight except the routed experts, K experts per MoE layer, the output
// head, and the cache the step looks at: every indexer key of a full
// layer, and min(n, index_topk) latents per layer. It is the numerator of
// the decode speed floor.
func (m *Model) DecodeReadBytes(n int) (weights, kv int64) {
	c := m.Cfg
	add := func(ws ...*compute.Matrix) {
		for _, w := range ws {
			weights += w.Bytes()
		}
	}
	add(m.W.Output)
	lat, key := int64(m.layout.specs[specMLA].SlotBytes), int64(m.layout.specs[specIndexer].SlotBytes)
	for _, L := range m.W.Layers {
		a := &L.Attn
		add(a.QA, a.QB, a.KVA, a.KVB, a.O)
		if x := a.Indexer; x != nil {
			add(x.WqB, x.Wk, x.WeightsProj)
			kv += int64(n) * key
		}
		kv += int64(min(n, c.IndexTopK)) * lat
		if L.Dense != nil {
			add(L.Dense.Gate, L.Dense.Up, L.Dense.Down)
			continue
		}
		f := L.MoE
		add(f.Router, f.Shared.Gate, f.Shared.Up, f.Shared.Down)
		e := f.Experts[0]
		weights += int64(c.ExpertsPerTok) * (e.Gate.Bytes() + e.Up.Bytes() + e.Down.Bytes())
	}
	return weights, kv
}

// PrefillFLOPs is the arithmetic of prefilling n tokens in one pass: two
// per weight of every matrix a token goes through (the active experts
// only, the absorbed per-head products, the output head for the last
// position), the indexer's scoring of every earlier key and the attention
// over the keys each position keeps. It is the numerator of the prefill
// speed floor.
func (m *Model) PrefillFLOPs(n int) float64 {
	c := m.Cfg
	var perTok float64
	mat := func(ws ...*compute.Matrix) {
		for _, w := range ws {
			perTok += 2 * float64(w.Rows) * float64(w.Cols)
		}
	}
	H, lat := float64(c.Heads), float64(c.KVLoraRank)
	var attn float64
	for _, L := range m.W.Layers {
		a := &L.Attn
		mat(a.QA, a.QB, a.KVA, a.KVB, a.O) // kv_b_proj's weights, used per head as absorbed query and value products
		if x := a.Indexer; x != nil {
			mat(x.WqB, x.Wk, x.WeightsProj)
		}
		if L.Dense != nil {
			mat(L.Dense.Gate, L.Dense.Up, L.Dense.Down)
		} else {
			f := L.MoE
			mat(f.Router, f.Shared.Gate, f.Shared.Up, f.Shared.Down)
			e := f.Experts[0]
			perTok += float64(c.ExpertsPerTok) * 2 * (float64(e.Gate.Rows*e.Gate.Cols) + float64(e.Up.Rows*e.Up.Cols) + float64(e.Down.Rows*e.Down.Cols))
		}
		for p := range n {
			keys := float64(min(p+1, c.IndexTopK))
			attn += 2 * keys * H * (2*lat + float64(c.RopeDim)) // logits over [lat | k_pe], then Σ p·lat
			if a.Indexer != nil {
				attn += 2 * float64(p+1) * float64(c.IndexHeads*c.IndexDim)
			}
		}
	}
	return perTok*float64(n) + attn + 2*float64(m.W.Output.Rows)*float64(m.W.Output.Cols)
}
