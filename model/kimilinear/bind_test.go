package kimilinear

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/safetensors"
)

// rewrite copies the tiny case's checkpoint into a new folder with its
// config, passing every tensor through edit (which may change it, or drop
// it by returning false), plus the extra tensors.
func rewrite(t *testing.T, edit func(w *safetensors.WriteTensor) bool, extra ...safetensors.WriteTensor) string {
	t.Helper()
	ck, err := safetensors.OpenDir(caseDir("kimi-linear/tiny"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var out []safetensors.WriteTensor
	for _, n := range ck.Names() {
		tt, _ := ck.Tensor(n)
		w := safetensors.WriteTensor{Name: n, DType: tt.DType, Shape: append([]int(nil), tt.Shape...), Data: append([]byte(nil), tt.Data...)}
		if edit == nil || edit(&w) {
			out = append(out, w)
		}
	}
	out = append(out, extra...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].DType.Size() > out[j].DType.Size() })
	dir := t.TempDir()
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), out, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), tinyConfig(t), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBindErrors: a checkpoint with a NaN weight, a NaN decay, a missing
// tensor, a mis-shaped one, one of an unsupported dtype and an unexpected
// one fails to load with one error naming each.
func TestBindErrors(t *testing.T) {
	nan := math.Float32bits(float32(math.NaN()))
	dir := rewrite(t, func(w *safetensors.WriteTensor) bool {
		switch w.Name {
		case "model.layers.1.self_attn.q_proj.weight":
			binary.LittleEndian.PutUint32(w.Data[4*17:], nan)
		case "model.layers.2.self_attn.A_log":
			binary.LittleEndian.PutUint32(w.Data[4:], nan)
		case "model.layers.3.self_attn.kv_b_proj.weight":
			return false
		case "model.layers.5.self_attn.q_conv1d.weight":
			w.Shape = []int{32, 8} // its 256 values, in the wrong shape
		case "model.layers.6.block_sparse_moe.experts.2.w1.weight":
			w.DType = safetensors.I32
		}
		return true
	}, safetensors.WriteTensor{Name: "model.layers.0.self_attn.extra", DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)})
	_, err := Load(dir, cpu.New(1), model.Options{})
	if err == nil {
		t.Fatal("a broken checkpoint loaded")
	}
	for _, s := range []string{
		`"model.layers.1.self_attn.q_proj.weight": element 17 is not finite`,
		`"model.layers.2.self_attn.A_log": element 1 is NaN`,
		`missing tensor "model.layers.3.self_attn.kv_b_proj.weight"`,
		`"model.layers.5.self_attn.q_conv1d.weight": shape [32 8]`,
		`"model.layers.6.block_sparse_moe.experts.2.w1.weight": dtype I32`,
		`unexpected tensor "model.layers.0.self_attn.extra"`,
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not mention %s:\n%v", s, err)
		}
	}
}

// TestLoadRejects: a folder without a usable config, and a cache dtype
// the family does not define, fail with errors that say so.
func TestLoadRejects(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type": "kimi_linear"}`), 0o644)
	if _, err := Load(dir, cpu.New(1), model.Options{}); err == nil || !strings.Contains(err.Error(), "vocab_size is missing") {
		t.Errorf("empty config: %v", err)
	}
	if _, err := Load(caseDir("kimi-linear/tiny"), cpu.New(1), model.Options{CacheDType: 99}); err == nil || !strings.Contains(err.Error(), "cache dtype") {
		t.Errorf("cache dtype 99: %v", err)
	}
}
