package gemma4

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

var _ model.Model = (*Model)(nil)

// ops is what the forward pass needs of a backend beyond compute.Backend.
type ops interface {
	compute.Backend
	compute.SharedKV
	compute.GeGLU
}

// Model is a loaded Gemma 4 checkpoint ready to run on a compute backend.
// Forward must not be called concurrently; everything else may be.
type Model struct {
	Cfg *Config
	// W is the bound checkpoint; w is the same weights as the backend
	// holds them.
	W      *Weights
	w      *resident
	be     ops
	ck     *safetensors.Checkpoint
	layout *cacheLayout
	// lastReader[l] is the last layer that reads layer l's cache (l itself
	// when no KV-shared layer reads it); -1 for KV-shared layers.
	lastReader []int
	// keyRope holds the cosines and sines of the full layers' derived keys
	// for positions [0, keyRope.Rows) (K=V models only); it grows as
	// sequences do.
	keyRope     compute.Tensor
	fingerprint string
}

// Arch is Gemma 4 for a model.Registry: the text-only save
// (Gemma4ForCausalLM) and the Hub's multimodal checkpoint, whose text model
// it runs.
var Arch = model.Architecture{
	Name:          "gemma4",
	ModelTypes:    []string{"gemma4", "gemma4_text"},
	Architectures: []string{"Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"},
	Load: func(dir string, be compute.Backend, o model.Options) (model.Model, error) {
		return LoadWith(dir, be, o)
	},
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
func New(cfg *Config, ck *safetensors.Checkpoint, be compute.Backend, o model.Options) (*Model, error) {
	if cfg.Unified {
		return nil, fmt.Errorf("gemma4: Gemma 4 Unified checkpoints (gemma4_unified) are not supported; only their text config is read, for planning")
	}
	b, ok := be.(ops)
	if !ok {
		return nil, fmt.Errorf("gemma4: backend %s lacks the ops Gemma 4 needs (compute.SharedKV and compute.GeGLU)", be.Name())
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
	m := &Model{Cfg: cfg, W: w, w: r, be: b, ck: ck, layout: lay, fingerprint: fingerprint(cfg, ck, o.CacheDType)}
	m.lastReader = make([]int, len(cfg.Layers))
	for i, l := range cfg.Layers {
		m.lastReader[i] = -1
		if !l.Shared {
			m.lastReader[i] = i
		}
	}
	for i, l := range cfg.Layers {
		if l.Shared {
			m.lastReader[l.Source] = max(m.lastReader[l.Source], i)
		}
	}
	return m, nil
}

// Backend is the backend the model runs on.
func (m *Model) Backend() compute.Backend { return m.be }

// Info implements model.Model.
func (m *Model) Info() model.Info {
	eos := int32(-1)
	if len(m.Cfg.EOS) > 0 {
		eos = int32(m.Cfg.EOS[0])
	}
	return model.Info{Arch: Arch.Name, Layers: len(m.Cfg.Layers), Hidden: m.Cfg.Hidden, BOS: int32(m.Cfg.BOS), EOS: eos, MaxContext: m.Cfg.MaxPosition}
}

// Close releases the checkpoint mapping. The model must not be used afterwards.
func (m *Model) Close() error {
	if m.ck == nil {
		return nil
	}
	if m.keyRope.Valid() {
		m.be.Free(m.keyRope)
		m.keyRope = compute.Tensor{}
	}
	err := m.ck.Close()
	m.ck = nil
	return err
}

// CacheSpecs are the cache kinds one sequence holds.
func (m *Model) CacheSpecs() []cache.Spec { return m.layout.specs }

// NewSeq takes a new sequence's fixed pages (the window rings) from pool.
func (m *Model) NewSeq(pool *cache.Pool) (*cache.Seq, error) {
	return cache.NewSeq(pool, m.layout.specs)
}

// VocabSize is the number of logits per position.
func (m *Model) VocabSize() int { return m.Cfg.VocabSize }

// PrefixAlign is where prefix snapshots are taken and restored: multiples
// of the sliding window W. A ring restores exactly at any position (a
// snapshot copies its W slots, the append kinds are shared), so any
// alignment is exact; W bounds the cost: each snapshot copies every
// sliding layer's whole ring, and a decoding request snapshots once per
// alignment, so the copying stays at about one ring slot per decoded token
// and layer, no more than the decode writes anyway.
func (m *Model) PrefixAlign() int { return m.Cfg.Window }

// Fingerprint identifies the checkpoint and the cache format: a hash of
// the resolved config and of every tensor's name, dtype, shape and first
// and last bytes.
func (m *Model) Fingerprint() string { return m.fingerprint }

func fingerprint(cfg *Config, ck *safetensors.Checkpoint, dt cache.DType) string {
	h := sha256.New()
	fmt.Fprintf(h, "gemma4 %v %d %d %d %+v %d %d %d %v %d %d %d %g %g %v %d cache %v\n", cfg.Multimodal, cfg.VocabSize, cfg.Hidden, cfg.Heads, cfg.Layers,
		cfg.Window, cfg.KVShared, cfg.PLE, cfg.MoE, cfg.Experts, cfg.ExpertsPerTok, cfg.MoEInter, cfg.Softcap, cfg.RMSEps, cfg.TieEmbeddings, cfg.MaxPosition, dt)
	for _, k := range []Kind{Sliding, Full} {
		fmt.Fprintf(h, "%v %+v\n", k, cfg.Rope[k])
	}
	for _, n := range ck.Names() {
		t, _ := ck.Tensor(n)
		fmt.Fprintf(h, "%s %s %v ", n, t.DType, t.Shape)
		k := min(len(t.Data), 64)
		h.Write(t.Data[:k])
		h.Write(t.Data[len(t.Data)-k:])
	}
	return fmt.Sprintf("gemma4:%x", h.Sum(nil)[:16])
}

// Prefault faults in the checkpoint's pages (see safetensors.Checkpoint.Prefault).
func (m *Model) Prefault(ctx context.Context) error { return m.ck.Prefault(ctx) }

// DecodeReadBytes is what one decode step at context n reads: every
// weight a token goes through (the K routed experts of each MoE layer, the
// output head) and the cache entries attention looks at, in the cache's
// format.
func (m *Model) DecodeReadBytes(n int) (weights, kv int64) {
	add := func(ws ...*compute.Matrix) {
		for _, w := range ws {
			if w != nil {
				weights += w.Bytes()
			}
		}
	}
	add(m.W.Output, m.W.PLEProj)
	for i := range m.W.Layers {
		L := &m.W.Layers[i]
		add(L.Attn.Q, L.Attn.K, L.Attn.V, L.Attn.O, L.MLP.Gate, L.MLP.Up, L.MLP.Down)
		if L.MoE != nil {
			add(L.MoE.RouterProj)
			weights += int64(m.Cfg.ExpertsPerTok) * (L.MoE.GateUp[0].Bytes() + L.MoE.Down[0].Bytes())
		}
		if L.PLE != nil {
			add(L.PLE.Gate, L.PLE.Proj)
		}
	}
	for _, s := range m.layout.specs {
		slots := n
		if s.Kind() == cache.Ring {
			slots = min(n, s.FixedSlots)
		}
		kv += int64(len(s.Layers)) * int64(slots) * int64(s.SlotBytes)
	}
	return weights, kv
}

// validate checks the batch before anything is computed or cached.
func (m *Model) validate(b *model.Batch) error {
	covered := 0
	seen := map[*cache.Seq]bool{}
	for i, s := range b.Spans {
		if s.Seq == nil {
			return fmt.Errorf("gemma4: span %d has no sequence", i)
		}
		if seen[s.Seq] {
			return fmt.Errorf("gemma4: span %d: sequence appears twice in one batch", i)
		}
		seen[s.Seq] = true
		if s.Draft != nil {
			return fmt.Errorf("gemma4: span %d carries a draft state, but Gemma 4 has no draft head", i)
		}
		if s.Len <= 0 || s.Start != covered || s.Start+s.Len > len(b.Tokens) {
			return fmt.Errorf("gemma4: span %d covers tokens [%d,%d) of %d; spans must tile the batch in order", i, s.Start, s.Start+s.Len, len(b.Tokens))
		}
		covered += s.Len
		if end := s.Seq.Len() + s.Len; end > m.Cfg.MaxPosition {
			return fmt.Errorf("gemma4: span %d reaches position %d, beyond the model's %d", i, end, m.Cfg.MaxPosition)
		}
	}
	if covered != len(b.Tokens) {
		return fmt.Errorf("gemma4: spans cover %d of %d tokens", covered, len(b.Tokens))
	}
	for i, t := range b.Tokens {
		if t < 0 || int(t) >= m.Cfg.VocabSize {
			return fmt.Errorf("gemma4: token %d at batch index %d is outside the vocabulary of %d", t, i, m.Cfg.VocabSize)
		}
		if m.Cfg.PLE > 0 && int(t) >= m.Cfg.PLEVocab {
			return fmt.Errorf("gemma4: token %d at batch index %d is outside the per-layer embedding's %d rows", t, i, m.Cfg.PLEVocab)
		}
	}
	return nil
}

// String describes the model.
func (m *Model) String() string {
	c := m.Cfg
	return fmt.Sprintf("Gemma 4: %d layers (%d sliding, window %d; %d full; %d KV-shared), hidden %d, vocab %d", len(c.Layers),
		len(c.LayersOf(Sliding)), c.Window, len(c.LayersOf(Full)), c.KVShared, c.Hidden, c.VocabSize)
}
