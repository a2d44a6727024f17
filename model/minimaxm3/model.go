package minimaxm3

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

// Model is a loaded MiniMax-M3 checkpoint ready to run on a compute
// backend. Forward must not be called concurrently; everything else may be.
type Model struct {
	Cfg *Config
	// W is the bound checkpoint; w is the same weights as the backend
	// holds them.
	W           *Weights
	w           *resident
	be          compute.Backend
	causal      compute.Causal
	msa         compute.MSA
	ck          *safetensors.Checkpoint
	layout      *cacheLayout
	fingerprint string
}

// Arch is MiniMax-M3 for a model.Registry: the text model save_pretrained
// writes (MiniMaxM3VLForCausalLM, model_type minimax_m3_vl_text) and the
// Hub's multimodal checkpoint, whose text model it runs.
var Arch = model.Architecture{
	Name:          "minimax-m3",
	ModelTypes:    ModelTypes,
	Architectures: Architectures,
	Load: func(dir string, be compute.Backend, o model.Options) (model.Model, error) {
		return LoadWith(dir, be, o)
	},
	Describe: Describe,
}

// Load reads dir/config.json and the checkpoint in dir (model.safetensors,
// or shards listed by model.safetensors.index.json) with a float32 cache.
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
// The backend must implement compute.Causal and compute.MSA.
func New(cfg *Config, ck *safetensors.Checkpoint, be compute.Backend, o model.Options) (*Model, error) {
	causal, ok := be.(compute.Causal)
	if !ok {
		return nil, fmt.Errorf("minimaxm3: the %s backend has no causal attention ops (compute.Causal); run on the CPU backend", be.Name())
	}
	msa, ok := be.(compute.MSA)
	if !ok {
		return nil, fmt.Errorf("minimaxm3: the %s backend has no MSA ops (compute.MSA: block selection, block-sparse attention, SwiGLU-OAI); run on the CPU backend", be.Name())
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
	return &Model{Cfg: cfg, W: w, w: r, be: be, causal: causal, msa: msa, ck: ck, layout: lay, fingerprint: fingerprint(cfg, ck, o.CacheDType)}, nil
}

// Backend is the backend the model runs on.
func (m *Model) Backend() compute.Backend { return m.be }

// Info implements model.Model.
func (m *Model) Info() model.Info {
	eos := int32(-1)
	if len(m.Cfg.EOS) > 0 {
		eos = int32(m.Cfg.EOS[0])
	}
	return model.Info{Arch: Arch.Name, Layers: m.Cfg.NumLayers(), Hidden: m.Cfg.Hidden, BOS: int32(m.Cfg.BOS), EOS: eos, MaxContext: m.Cfg.MaxPosition}
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

// PrefixAlign is 1: both kinds are append-only, so a sequence's state
// after any number of tokens is restorable from a snapshot taken there
// (the block scores are recomputed from the cached indexer keys, so a
// block that was partial at the snapshot is scored exactly afterwards).
func (m *Model) PrefixAlign() int { return 1 }

// Fingerprint identifies the checkpoint and the cache format: a hash of
// the resolved config and of every tensor's name, dtype, shape and first
// and last bytes.
func (m *Model) Fingerprint() string { return m.fingerprint }

func fingerprint(cfg *Config, ck *safetensors.Checkpoint, dt cache.DType) string {
	h := sha256.New()
	fmt.Fprintf(h, "minimax-m3 %+v cache %v\n", *cfg, dt)
	for _, n := range ck.Names() {
		t, _ := ck.Tensor(n)
		fmt.Fprintf(h, "%s %s %v ", n, t.DType, t.Shape)
		k := min(len(t.Data), 64)
		h.Write(t.Data[:k])
		h.Write(t.Data[len(t.Data)-k:])
	}
	return fmt.Sprintf("minimax-m3:%x", h.Sum(nil)[:16])
}

// Prefault faults in the checkpoint's pages (see safetensors.Checkpoint.Prefault).
func (m *Model) Prefault(ctx context.Context) error { return m.ck.Prefault(ctx) }

// DecodeReadBytes is what one decode step at context n reads: every weight
// a token goes through (K routed experts per MoE layer, the output head),
// the K and V of every position in full layers and of the chosen blocks
// (at most index_topk_blocks · block) in sparse layers, and every indexer
// key of a sparse layer.
func (m *Model) DecodeReadBytes(n int) (weights, kv int64) {
	c := m.Cfg
	add := func(ws ...*compute.Matrix) {
		for _, w := range ws {
			if w != nil {
				weights += w.Bytes()
			}
		}
	}
	add(m.W.Output)
	kvSlot := int64(m.layout.specs[specKV].SlotBytes)
	for l, L := range m.W.Layers {
		a := &L.Attn
		add(a.Q, a.K, a.V, a.O)
		if x := a.Indexer; x != nil {
			add(x.Q, x.K)
			kv += int64(n) * int64(m.layout.specs[specIndexer].SlotBytes)
		}
		if c.Sparse[l] {
			kv += int64(min(n, c.IndexTopK*c.IndexBlock)) * kvSlot
		} else {
			kv += int64(n) * kvSlot
		}
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
// per weight of every matrix a token goes through (active experts only;
// the output head for the last position), the indexer's scoring of every
// earlier key, and attention over the keys each position sees.
func (m *Model) PrefillFLOPs(n int) float64 {
	c := m.Cfg
	var perTok, attn float64
	mat := func(ws ...*compute.Matrix) {
		for _, w := range ws {
			perTok += 2 * float64(w.Rows) * float64(w.Cols)
		}
	}
	for l, L := range m.W.Layers {
		a := &L.Attn
		mat(a.Q, a.K, a.V, a.O)
		if x := a.Indexer; x != nil {
			mat(x.Q, x.K)
		}
		if L.Dense != nil {
			mat(L.Dense.Gate, L.Dense.Up, L.Dense.Down)
		} else {
			f := L.MoE
			mat(f.Router, f.Shared.Gate, f.Shared.Up, f.Shared.Down)
			e := f.Experts[0]
			perTok += float64(c.ExpertsPerTok) * 2 * float64(e.Gate.Rows*e.Gate.Cols+e.Up.Rows*e.Up.Cols+e.Down.Rows*e.Down.Cols)
		}
		for p := range n {
			keys := float64(p + 1)
			if c.Sparse[l] {
				attn += 2 * keys * float64(c.IndexHeads*c.IndexDim)
				keys = float64(min(p+1, c.IndexTopK*c.IndexBlock))
			}
			attn += 4 * keys * float64(c.Heads*c.HeadDim)
		}
	}
	return perTok*float64(n) + attn + 2*float64(m.W.Output.Rows)*float64(m.W.Output.Cols)
}

// String describes the model.
func (m *Model) String() string {
	c := m.Cfg
	return fmt.Sprintf("MiniMax-M3: %d layers (%d MSA: block %d, top %d, %d local), hidden %d, vocab %d", c.NumLayers(), len(c.SparseLayers()), c.IndexBlock, c.IndexTopK, c.IndexLocal, c.Hidden, c.VocabSize)
}
