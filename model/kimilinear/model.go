package kimilinear

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

// Name is the registry's name for the architecture.
const Name = "kimi-linear"

// Arch is Kimi Linear for a model.Registry.
var Arch = model.Architecture{
	Name:          Name,
	ModelTypes:    []string{"kimi_linear"},
	Architectures: []string{"KimiLinearForCausalLM"},
	Load: func(dir string, be compute.Backend, o model.Options) (model.Model, error) {
		return Load(dir, be, o)
	},
	Describe: Describe,
}

// ops are the backend ops beyond compute.Backend the forward pass needs:
// KDA's delta rule, the short convolution, the absorbed latent attention
// and routed MoE, the sigmoid gate and dense SwiGLU.
type ops interface {
	compute.KDA
	compute.Recurrent
	compute.MLA
	compute.Gating
}

// Model is a loaded Kimi Linear checkpoint ready to run on a compute
// backend. Forward must not be called concurrently; everything else may be.
type Model struct {
	Cfg *Config
	// W is the bound checkpoint; w is the same weights as the backend
	// holds them, with the ops' arguments assembled.
	W       *Weights
	w       *resident
	be      compute.Backend
	ops     ops
	ck      *safetensors.Checkpoint
	layout  *cacheLayout
	routing compute.Routing
	// fingerprint identifies the checkpoint (config and tensor inventory).
	fingerprint string
}

// Load reads dir/config.json and the checkpoint in dir (model.safetensors,
// or the shards model.safetensors.index.json lists) and binds the weights.
func Load(dir string, be compute.Backend, o model.Options) (*Model, error) {
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
	x, ok := be.(ops)
	if !ok {
		return nil, fmt.Errorf("kimilinear: the %s backend lacks Kimi Linear's ops (compute.KDA, Recurrent, MLA, Gating); run on the CPU backend", be.Name())
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
	return &Model{
		Cfg: cfg, W: w, w: r, be: be, ops: x, ck: ck, layout: lay,
		routing:     compute.Routing{Groups: cfg.Groups, TopGroups: cfg.TopGroups, Unnormalized: !cfg.NormTopK},
		fingerprint: fingerprint(cfg, ck),
	}, nil
}

// Backend is the backend the model runs on.
func (m *Model) Backend() compute.Backend { return m.be }

// Info implements model.Model; EOS is the config's first eos_token_id.
func (m *Model) Info() model.Info {
	eos := int32(-1)
	if len(m.Cfg.EOS) > 0 {
		eos = int32(m.Cfg.EOS[0])
	}
	return model.Info{Arch: Name, Layers: m.Cfg.NumLayers(), Hidden: m.Cfg.Hidden, BOS: int32(m.Cfg.BOS), EOS: eos, MaxContext: m.Cfg.MaxPosition}
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

// CacheSpecs implements model.Model: the kinds of CacheKinds for the
// model's cache dtype.
func (m *Model) CacheSpecs() []cache.Spec { return m.layout.specs }

// NewSeq takes a new sequence's fixed pages (its conv and delta-rule
// state) from pool, zeroed: the state of an empty sequence.
func (m *Model) NewSeq(pool *cache.Pool) (*cache.Seq, error) {
	s, err := cache.NewSeq(pool, m.layout.specs)
	if err != nil {
		return nil, err
	}
	for i, sp := range s.Specs() {
		if sp.Kind() != cache.Recurrent {
			continue
		}
		zero := make([]byte, sp.SlotBytes)
		for j := range sp.Layers {
			for k := range sp.FixedSlots {
				m.be.Write(s.Slot(i, j, k), zero)
			}
		}
	}
	return s, nil
}

// VocabSize is the number of logits per position.
func (m *Model) VocabSize() int { return m.Cfg.VocabSize }

func (m *Model) String() string {
	return fmt.Sprintf("Kimi Linear: %d layers (%d KDA, %d MLA), hidden %d, vocab %d",
		m.Cfg.NumLayers(), len(m.Cfg.LayersOf(KDA)), len(m.Cfg.LayersOf(MLA)), m.Cfg.Hidden, m.Cfg.VocabSize)
}

// Align is the interval of the positions a sequence's state is restored at
// from a prefix snapshot: the reference's KDA chunk (64), as for Qwen3.5's
// delta rule.
const Align = 64

// PrefixAlign implements model.PrefixAligner: the KDA layers' recurrent
// state is only snapshotted and restored at multiples of Align (the MLA
// latents, appended per token, could be restored anywhere).
func (m *Model) PrefixAlign() int { return Align }

// Fingerprint identifies the checkpoint: a hash of the resolved config and
// of every tensor's name, dtype, shape and first and last bytes. A
// sequence state is only resumed by a model with the same fingerprint.
func (m *Model) Fingerprint() string { return m.fingerprint }

func fingerprint(cfg *Config, ck *safetensors.Checkpoint) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s %+v\n", Name, *cfg)
	for _, n := range ck.Names() {
		t, _ := ck.Tensor(n)
		fmt.Fprintf(h, "%s %s %v ", n, t.DType, t.Shape)
		k := min(len(t.Data), 64)
		h.Write(t.Data[:k])
		h.Write(t.Data[len(t.Data)-k:])
	}
	return fmt.Sprintf("%s:%x", Name, h.Sum(nil)[:16])
}

// Prefault faults in the checkpoint's pages (see safetensors.Checkpoint.Prefault).
func (m *Model) Prefault(ctx context.Context) error { return m.ck.Prefault(ctx) }

// DecodeReadBytes implements model.DecodeReader: one decode step at
// context n reads every weight except the routed experts, K experts per
// MoE layer and the output head; and of the cache every latent of the MLA
// layers, and the conv and delta-rule state, which it also writes back
// (counted twice).
func (m *Model) DecodeReadBytes(n int) (weights, kv int64) {
	add := func(ws ...*compute.Matrix) {
		for _, w := range ws {
			if w != nil {
				weights += w.Bytes()
			}
		}
	}
	add(m.W.Output)
	for _, L := range m.W.Layers {
		if k := L.KDA; k != nil {
			add(k.QProj, k.KProj, k.VProj, k.FA, k.FB, k.BProj, k.GA, k.GB, k.OProj)
		}
		if a := L.MLA; a != nil {
			add(a.Q, a.QA, a.QB, a.KVA, a.KVB, a.O)
		}
		if d := L.Dense; d != nil {
			add(d.Gate, d.Up, d.Down)
		}
		if e := L.MoE; e != nil {
			add(e.Router, e.Shared.Gate, e.Shared.Up, e.Shared.Down)
			x := e.Experts[0]
			weights += int64(m.Cfg.ExpertsPerTok) * (x.Gate.Bytes() + x.Up.Bytes() + x.Down.Bytes())
		}
	}
	for _, sp := range m.layout.specs {
		if sp.Kind() == cache.Append {
			kv += sp.Bytes(n)
		} else {
			kv += 2 * sp.Bytes(n)
		}
	}
	return weights, kv
}

// PrefillFLOPs implements model.PrefillCounter: two per weight of every
// matrix a token goes through (the active experts only, kv_b_proj's
// weights once as the absorbed per-head products, the output head for the
// last position), the KDA recurrence (per token and head, the decayed
// read, the update and the output over the dk×dk state: about 6·dk²) and
// MLA's attention over every earlier position in its absorbed form.
func (m *Model) PrefillFLOPs(n int) float64 {
	c := m.Cfg
	var perTok float64
	mat := func(ws ...*compute.Matrix) {
		for _, w := range ws {
			if w != nil {
				perTok += 2 * float64(w.Rows) * float64(w.Cols)
			}
		}
	}
	var attn float64
	for _, L := range m.W.Layers {
		if k := L.KDA; k != nil {
			mat(k.QProj, k.KProj, k.VProj, k.FA, k.FB, k.BProj, k.GA, k.GB, k.OProj)
			perTok += 6 * float64(c.LinHeads) * float64(c.LinHeadDim) * float64(c.LinHeadDim)
		}
		if a := L.MLA; a != nil {
			mat(a.Q, a.QA, a.QB, a.KVA, a.KVB, a.O)
			for p := range n {
				attn += 2 * float64(p+1) * float64(c.Heads) * float64(2*c.KVLoraRank+c.RopeDim)
			}
		}
		if d := L.Dense; d != nil {
			mat(d.Gate, d.Up, d.Down)
		}
		if e := L.MoE; e != nil {
			mat(e.Router, e.Shared.Gate, e.Shared.Up, e.Shared.Down)
			x := e.Experts[0]
			perTok += float64(c.ExpertsPerTok) * 2 * (float64(x.Gate.Rows*x.Gate.Cols) + float64(x.Up.Rows*x.Up.Cols) + float64(x.Down.Rows*x.Down.Cols))
		}
	}
	return perTok*float64(n) + attn + 2*float64(m.W.Output.Rows)*float64(m.W.Output.Cols)
}
