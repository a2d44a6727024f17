package qwen35

import (
	"fmt"
	"path/filepath"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/safetensors"
)

// Model is a loaded Qwen3.5 checkpoint ready to run on a compute backend.
// Forward must not be called concurrently; everything else may be.
type Model struct {
	Cfg     *Config
	W       *Weights
	be      hostOps
	ck      *safetensors.Checkpoint
	invFreq []float32 // RoPE inverse frequencies, [R/2]
}

// Load reads dir/config.json and the checkpoint in dir (model.safetensors,
// or shards listed by model.safetensors.index.json) and binds the weights.
func Load(dir string, be compute.Backend) (*Model, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	m, err := New(cfg, ck, be)
	if err != nil {
		ck.Close()
		return nil, err
	}
	return m, nil
}

// New binds an open checkpoint to cfg. The model takes ownership of ck.
func New(cfg *Config, ck *safetensors.Checkpoint, be compute.Backend) (*Model, error) {
	h, err := hostOpsOf(be)
	if err != nil {
		return nil, err
	}
	w, err := Bind(cfg, ck)
	if err != nil {
		return nil, err
	}
	return &Model{Cfg: cfg, W: w, be: h, ck: ck, invFreq: ropeInvFreq(cfg.RopeDim, cfg.RopeTheta)}, nil
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

// VocabSize is the number of logits per position.
func (m *Model) VocabSize() int { return m.Cfg.VocabSize }

// NewState returns the state of an empty sequence.
func (m *Model) NewState() *State { return m.Cfg.NewState() }

func (m *Model) String() string {
	kind := "dense"
	if m.Cfg.MoE {
		kind = "MoE"
	}
	return fmt.Sprintf("Qwen3.5 %s: %d layers (%d full attention), hidden %d, vocab %d", kind, len(m.Cfg.Layers), len(m.Cfg.LayersOf(Full)), m.Cfg.Hidden, m.Cfg.VocabSize)
}

// PrefixAlign is where a sequence's state can be snapshotted for prefix
// reuse without changing any bit of what follows: at multiples of the
// delta rule's chunk (64), where a longer feed's chunks end too (see
// GatedDeltaRuleChunked), so restoring a snapshot taken there and feeding
// the rest gives the logits of the uninterrupted feed exactly.
func (m *Model) PrefixAlign() int { return DeltaChunk }
