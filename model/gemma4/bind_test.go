package gemma4

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/safetensors"
)

// rewrite copies the tiny case's checkpoint into a new folder with config
// cfg, passing every tensor through edit (which may rename it, change it,
// or drop it by returning false), plus the extra tensors.
func rewrite(t *testing.T, cfg []byte, edit func(w *safetensors.WriteTensor) bool, extra ...safetensors.WriteTensor) string {
	t.Helper()
	src := caseDir("gemma4/tiny")
	ck, err := safetensors.OpenDir(src)
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
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func tinyConfig(t *testing.T) []byte {
	b, err := os.ReadFile(filepath.Join(caseDir("gemma4/tiny"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBindHubNaming: the tiny case saved as the Hub's multimodal checkpoint
// (text model under model.language_model.*, config under text_config, a
// vision tower beside it) loads and computes the same logits bit for bit.
func TestBindHubNaming(t *testing.T) {
	var text map[string]any
	if err := json.Unmarshal(tinyConfig(t), &text); err != nil {
		t.Fatal(err)
	}
	delete(text, "architectures")
	text["model_type"] = "gemma4_text"
	hub, _ := json.Marshal(map[string]any{
		"architectures": []string{"Gemma4ForConditionalGeneration"}, "model_type": "gemma4",
		"text_config": text, "vision_config": map[string]any{"model_type": "gemma4_vision"},
	})
	vision := safetensors.WriteTensor{Name: "model.vision_tower.encoder.layers.0.mlp.up_proj.weight", DType: safetensors.F32, Shape: []int{2, 2}, Data: make([]byte, 16)}
	dir := rewrite(t, hub, func(w *safetensors.WriteTensor) bool {
		w.Name = "model.language_model." + strings.TrimPrefix(w.Name, "model.")
		return true
	}, vision)
	hubModel, err := Load(dir, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	defer hubModel.Close()
	if !hubModel.Cfg.Multimodal {
		t.Fatal("the Hub config was not read as multimodal")
	}
	text0, err := Load(caseDir("gemma4/tiny"), cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	defer text0.Close()
	c, err := golden.Load(caseDir("gemma4/tiny"))
	if err != nil {
		t.Fatal(err)
	}
	ids := c.InputIDs[:40]
	a, err := golden.Feed(context.Background(), hubModel, ids, []int{40})
	if err != nil {
		t.Fatal(err)
	}
	b, err := golden.Feed(context.Background(), text0, ids, []int{40})
	if err != nil {
		t.Fatal(err)
	}
	if d := golden.MaxAbsDiff(a, b); d != 0 {
		t.Fatalf("Hub naming: logits differ by %g", d)
	}
}

// TestBindErrors: a checkpoint with a missing, a mis-shaped, a
// non-finite, a wrongly typed and an unexpected tensor fails with one error
// naming all of them.
func TestBindErrors(t *testing.T) {
	nan := make([]byte, 4*16)
	binary.LittleEndian.PutUint32(nan[4*3:], math.Float32bits(float32(math.NaN())))
	dir := rewrite(t, tinyConfig(t), func(w *safetensors.WriteTensor) bool {
		switch w.Name {
		case "model.layers.2.mlp.up_proj.weight":
			return false
		case "model.layers.5.self_attn.q_proj.weight":
			w.Shape = []int{w.Shape[1], w.Shape[0]}
		case "model.layers.1.self_attn.k_norm.weight":
			w.Data = nan
		case "model.layers.3.mlp.down_proj.weight":
			w.DType = safetensors.I32
		case "model.layers.5.self_attn.k_proj.weight":
			b := append([]byte(nil), w.Data...)
			binary.LittleEndian.PutUint32(b[4*7:], math.Float32bits(float32(math.Inf(1))))
			w.Data = b
		}
		return true
	}, safetensors.WriteTensor{Name: "model.layers.0.self_attn.v_norm.weight", DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)})
	_, err := Load(dir, cpu.New(1))
	if err == nil {
		t.Fatal("a broken checkpoint loaded")
	}
	for _, want := range []string{
		`missing tensor "model.layers.2.mlp.up_proj.weight"`,
		`"model.layers.5.self_attn.q_proj.weight": shape [64 256]`,
		`"model.layers.1.self_attn.k_norm.weight": element 3 is NaN`,
		`"model.layers.3.mlp.down_proj.weight": dtype I32`,
		`"model.layers.5.self_attn.k_proj.weight": element 7 is not finite`,
		`unexpected tensor "model.layers.0.self_attn.v_norm.weight"`,
		"6 problems",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not mention %s:\n%v", want, err)
		}
	}
}
