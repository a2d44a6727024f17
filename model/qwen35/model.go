package qwen35

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
	_ model.Model         = (*Model)(nil)
	_ model.PrefixAligner = (*Model)(nil)
	_ model.Fingerprinter = (*Model)(nil)
	_ model.Prefaulter    = (*Model)(nil)
	_ model.DecodeReader  = (*Model)(nil)
)

// Arch is Qwen3.5 (dense and MoE) for a model.Registry: the Hub's
// multimodal configs (the text model under text_config) and the text-only
// ones.
var Arch = model.Architecture{
	Name:       "qwen3.5",
	ModelTypes: []string{"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"},
	Architectures: []string{"Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration",
		"Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration"},
	Load: func(dir string, be compute.Backend, o model.Options) (model.Model, error) {
		return LoadWith(dir, be, Options{Options: o})
	},
	Describe: Describe,
}

// Options are what a caller may ask of a loaded Qwen3.5 model.
type Options struct {
	model.Options
	// ChunkedDeltaRule runs the delta rule in its chunked form (64-token
	// chunks aligned to positions, the reference's prefill form) on every
	// span, instead of token by token. Paths then agree bit for bit only
	// across splits at multiples of 64; the default form agrees across
	// every split.
	ChunkedDeltaRule bool
}

// Model is a loaded Qwen3.5 checkpoint ready to run on a compute backend.
// Forward and Draft must not be called concurrently; everything else may
// be.
type Model struct {
	Cfg *Config
	// W is the bound checkpoint; w is the same weights as the backend
	// holds them, with the ops' arguments assembled.
	W         *Weights
	w         *resident
	be        backend
	ck        *safetensors.Checkpoint
	layout    *cacheLayout
	mtpLayout *cacheLayout // nil without MTP layers
	chunked   bool
	// fingerprint identifies the checkpoint (config and tensor inventory).
	fingerprint string
}

// Load reads dir/config.json and the checkpoint in dir (model.safetensors,
// or shards listed by model.safetensors.index.json) and binds the weights,
// with default options (a float32 cache, the delta rule token by token).
func Load(dir string, be compute.Backend) (*Model, error) { return LoadWith(dir, be, Options{}) }

// LoadWith is Load with options.
func LoadWith(dir string, be compute.Backend, o Options) (*Model, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	if err := cfg.applyGenerationConfig(filepath.Join(dir, "generation_config.json")); err != nil {
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

// backend is what the forward pass needs of a compute backend: the common
// ops and those of linear attention.
type backend interface {
	compute.Backend
	compute.Recurrent
	compute.Causal
	compute.Gating
}

// New binds an open checkpoint to cfg. The model takes ownership of ck.
func New(cfg *Config, ck *safetensors.Checkpoint, cb compute.Backend, o Options) (*Model, error) {
	be, ok := cb.(backend)
	if !ok {
		return nil, fmt.Errorf("qwen35: the %s backend has no linear-attention ops (Gated DeltaNet); run Qwen3.5 on the CPU", cb.Name())
	}
	w, err := Bind(cfg, ck)
	if err != nil {
		return nil, err
	}
	specs, err := cfg.CacheKinds(o.CacheDType)
	if err != nil {
		return nil, err
	}
	lay, err := newCacheLayout(cfg, specs, o.CacheDType)
	if err != nil {
		return nil, err
	}
	m := &Model{Cfg: cfg, W: w, be: be, ck: ck, layout: lay, chunked: o.ChunkedDeltaRule, fingerprint: fingerprint(cfg, ck)}
	if w.MTP != nil {
		n := len(w.MTP.Layers)
		c := *cfg
		c.MTPLayers = n
		mspecs, err := c.MTPCacheKinds(o.CacheDType)
		if err != nil {
			return nil, err
		}
		if m.mtpLayout, err = newCacheLayout(&c, mspecs, o.CacheDType); err != nil {
			return nil, err
		}
	}
	if m.w, err = makeResident(be, cfg, w); err != nil {
		return nil, err
	}
	return m, nil
}

// Backend is the backend the model runs on.
func (m *Model) Backend() compute.Backend { return m.be }

// Info implements model.Model. EOS is the first eos_token_id of
// generation_config.json, else of config.json (Qwen3.5's instruct
// checkpoints list <|im_end|> first there); BOS likewise.
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
	err := m.ck.Close()
	m.ck = nil
	return err
}

// CacheSpecs implements model.Model: the kinds of CacheKinds for the
// model's cache dtype.
func (m *Model) CacheSpecs() []cache.Spec { return m.layout.specs }

// NewSeq takes a new sequence's fixed pages (its conv and delta-rule
// state) from pool. Fresh pages are zero: the state of an empty sequence.
func (m *Model) NewSeq(pool *cache.Pool) (*cache.Seq, error) {
	s, err := cache.NewSeq(pool, m.layout.specs)
	if err != nil {
		return nil, err
	}
	m.clearState(s)
	return s, nil
}

// clearState zeroes the recurrent slots of s: pages come back from the
// pool holding whatever their last holder wrote.
func (m *Model) clearState(s *cache.Seq) {
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
}

// VocabSize is the number of logits per position.
func (m *Model) VocabSize() int { return m.Cfg.VocabSize }

func (m *Model) String() string {
	kind := "dense"
	if m.Cfg.MoE {
		kind = "MoE"
	}
	return fmt.Sprintf("Qwen3.5 %s: %d layers (%d full attention), hidden %d, vocab %d", kind, len(m.Cfg.Layers), len(m.Cfg.LayersOf(Full)), m.Cfg.Hidden, m.Cfg.VocabSize)
}

// DeltaChunk is the chunk length of the chunked delta rule, as in the
// reference (transformers' torch_chunk_gated_delta_rule, chunk_size 64).
const DeltaChunk = 64

// PrefixAlign implements model.PrefixAligner: snapshots are taken and
// restored at multiples of the delta rule's chunk (64), where a longer
// feed's chunks end too, so that restoring one and feeding the rest gives
// the bits of the uninterrupted feed in either form of the delta rule.
func (m *Model) PrefixAlign() int { return DeltaChunk }

// Fingerprint identifies the checkpoint: a hash of the resolved config and
// of every tensor's name, dtype, shape and first and last bytes. Two
// processes that load the same checkpoint agree on it; a sequence state is
// only resumed by a model with the same fingerprint.
func (m *Model) Fingerprint() string { return m.fingerprint }

func fingerprint(cfg *Config, ck *safetensors.Checkpoint) string {
	h := sha256.New()
	fmt.Fprintf(h, "qwen3.5 %+v\n", *cfg)
	for _, n := range ck.Names() {
		t, _ := ck.Tensor(n)
		fmt.Fprintf(h, "%s %s %v ", n, t.DType, t.Shape)
		k := min(len(t.Data), 64)
		h.Write(t.Data[:k])
		h.Write(t.Data[len(t.Data)-k:])
	}
	return fmt.Sprintf("qwen3.5:%x", h.Sum(nil)[:16])
}

// DecodeReadBytes implements model.DecodeReader: one decode step at
// context n reads every weight of the main layers except the routed
// experts, K experts per MoE layer and the output head; and of the cache
// every key and value of the full-attention layers, and the conv and
// delta-rule state, which it also writes back (counted twice).
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
		if a := L.Attn; a != nil {
			add(a.QProj, a.KProj, a.VProj, a.OProj)
		}
		if g := L.GDN; g != nil {
			add(g.InQKV, g.InZ, g.InB, g.InA, g.OutProj)
		}
		if L.MLP != nil {
			add(L.MLP.Gate, L.MLP.Up, L.MLP.Down)
		}
		if e := L.MoE; e != nil {
			add(e.Router, e.SharedGate, e.Shared.Gate, e.Shared.Up, e.Shared.Down)
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

// Prefault faults in the checkpoint's pages (see safetensors.Checkpoint.Prefault).
func (m *Model) Prefault(ctx context.Context) error { return m.ck.Prefault(ctx) }
