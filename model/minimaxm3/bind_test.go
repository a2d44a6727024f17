package minimaxm3

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/safetensors"
)

// readAll returns every tensor of the checkpoint in dir.
func readAll(t *testing.T, dir string) []safetensors.WriteTensor {
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var out []safetensors.WriteTensor
	for _, n := range ck.Names() {
		tn, _ := ck.Tensor(n)
		out = append(out, safetensors.WriteTensor{Name: n, DType: tn.DType, Shape: tn.Shape, Data: append([]byte(nil), tn.Data...)})
	}
	return out
}

// toHub renames a save_pretrained checkpoint into the Hub's naming: the
// text model under language_model.*, the MoE under block_sparse_moe with
// the score bias beside the gate and per-expert w1/w3/w2, separate gate
// and up projections, self_attn.index_*; plus a vision tensor and an MTP
// tensor the text model must leave alone.
func toHub(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
	moe := regexp.MustCompile(`^model\.layers\.(\d+)\.mlp\.(gate\.|experts\.|shared_experts\.)`)
	var out []safetensors.WriteTensor
	add := func(name string, dt safetensors.DType, shape []int, data []byte) {
		out = append(out, safetensors.WriteTensor{Name: name, DType: dt, Shape: shape, Data: data})
	}
	for _, x := range ts {
		n := x.Name
		if n == "lm_head.weight" {
			add("language_model.lm_head.weight", x.DType, x.Shape, x.Data)
			continue
		}
		if moe.MatchString(n) {
			n = strings.Replace(n, ".mlp.", ".block_sparse_moe.", 1)
		}
		n = strings.Replace(n, "gate.e_score_correction_bias", "e_score_correction_bias", 1)
		n = strings.Replace(n, "self_attn.indexer.", "self_attn.index_", 1)
		n = "language_model." + n
		switch {
		case strings.HasSuffix(n, "experts.gate_up_proj") && !strings.Contains(n, "shared"):
			E, I2, D := x.Shape[0], x.Shape[1], x.Shape[2]
			per := len(x.Data) / E
			for e := range E {
				d := x.Data[e*per : (e+1)*per]
				p := strings.TrimSuffix(n, "gate_up_proj") + itoa(e) + "."
				add(p+"w1.weight", x.DType, []int{I2 / 2, D}, d[:per/2])
				add(p+"w3.weight", x.DType, []int{I2 / 2, D}, d[per/2:])
			}
		case strings.HasSuffix(n, "experts.down_proj") && !strings.Contains(n, "shared"):
			E := x.Shape[0]
			per := len(x.Data) / E
			for e := range E {
				add(strings.TrimSuffix(n, "down_proj")+itoa(e)+".w2.weight", x.DType, x.Shape[1:], x.Data[e*per:(e+1)*per])
			}
		case strings.HasSuffix(n, "gate_up_proj.weight"):
			half := len(x.Data) / 2
			p := strings.TrimSuffix(n, "gate_up_proj.weight")
			add(p+"gate_proj.weight", x.DType, []int{x.Shape[0] / 2, x.Shape[1]}, x.Data[:half])
			add(p+"up_proj.weight", x.DType, []int{x.Shape[0] / 2, x.Shape[1]}, x.Data[half:])
		default:
			add(n, x.DType, x.Shape, x.Data)
		}
	}
	f32 := make([]byte, 16)
	add("vision_tower.layers.0.mlp.fc1.weight", safetensors.F32, []int{2, 2}, f32)
	add("language_model.model.mtp.0.proj.weight", safetensors.F32, []int{2, 2}, f32)
	return out
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// hubConfig nests the tiny case's text config in the Hub's multimodal
// spelling, with the legacy names transformers maps.
func hubConfig(t *testing.T) []byte {
	b, err := os.ReadFile(filepath.Join(caseDir("minimax-m3/tiny"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var text map[string]any
	if err := json.Unmarshal(b, &text); err != nil {
		t.Fatal(err)
	}
	freq := []int{}
	for _, l := range text["layer_types"].([]any) {
		freq = append(freq, map[bool]int{true: 1}[l == "minimax_m3_sparse"])
	}
	moe := []int{}
	for _, l := range text["mlp_layer_types"].([]any) {
		moe = append(moe, map[bool]int{true: 1}[l == "sparse"])
	}
	text["sparse_attention_config"] = map[string]any{"sparse_attention_freq": freq, "sparse_num_index_heads": text["index_n_heads"],
		"sparse_index_dim": text["index_head_dim"], "sparse_block_size": text["index_block_size"], "sparse_topk_blocks": text["index_topk_blocks"],
		"sparse_local_block": text["index_local_blocks"]}
	text["moe_layer_freq"] = moe
	rp := text["rope_parameters"].(map[string]any)
	text["rope_theta"], text["partial_rotary_factor"] = rp["rope_theta"], rp["partial_rotary_factor"]
	for _, k := range []string{"layer_types", "mlp_layer_types", "index_n_heads", "index_head_dim", "index_block_size", "index_topk_blocks",
		"index_local_blocks", "rope_parameters", "model_type", "architectures"} {
		delete(text, k)
	}
	text["hidden_act"], text["scoring_func"], text["n_shared_experts"] = "swigluoai", "sigmoid", 1
	top := map[string]any{"model_type": "minimax_m3_vl", "architectures": []string{"MiniMaxM3SparseForConditionalGeneration"},
		"text_config": text, "vision_config": map[string]any{"hidden_size": 2}, "tie_word_embeddings": false}
	out, _ := json.Marshal(top)
	return out
}

// TestBindHub: the tiny case renamed into the Hub's naming and config
// spelling loads and gives the save_pretrained checkpoint's logits bit
// for bit.
func TestBindHub(t *testing.T) {
	src := caseDir("minimax-m3/tiny")
	c, err := golden.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), hubConfig(t), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), toHub(readAll(t, src)), nil); err != nil {
		t.Fatal(err)
	}
	ids := c.InputIDs
	ctx := context.Background()
	var logits [2][]float32
	for i, d := range []string{src, dir} {
		m, err := Load(d, cpu.New(0))
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 && (!m.Cfg.Multimodal || DetectNaming(m.ck) != Hub) {
			t.Fatalf("the Hub folder loaded as multimodal %v, naming %v", m.Cfg.Multimodal, DetectNaming(m.ck))
		}
		if logits[i], err = golden.Feed(ctx, m, ids, []int{len(ids)}); err != nil {
			t.Fatal(err)
		}
		m.Close()
	}
	if d := golden.MaxAbsDiff(logits[0], logits[1]); d != 0 {
		t.Fatalf("Hub naming: logits differ by %g", d)
	}

	// transformers' save of the conditional-generation class: the text
	// model under model.language_model.*, save_pretrained's module names,
	// the vision tower beside it.
	vl := t.TempDir()
	if err := os.WriteFile(filepath.Join(vl, "config.json"), hubConfig(t), 0o644); err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.WriteTensor
	for _, x := range readAll(t, src) {
		if x.Name != "lm_head.weight" {
			x.Name = "model.language_model." + strings.TrimPrefix(x.Name, "model.")
		}
		ts = append(ts, x)
	}
	ts = append(ts, safetensors.WriteTensor{Name: "model.vision_tower.patch_embed.weight", DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)})
	if err := safetensors.WriteFile(filepath.Join(vl, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	m, err := Load(vl, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got, err := golden.Feed(ctx, m, ids, []int{len(ids)})
	if err != nil {
		t.Fatal(err)
	}
	if d := golden.MaxAbsDiff(logits[0], got); d != 0 {
		t.Fatalf("model.language_model.* naming: logits differ by %g", d)
	}
}

// TestBindErrors: a broken checkpoint is refused with every problem named
// in one error: missing, mis-shaped, non-finite, wrong-dtype and
// unexpected tensors.
func TestBindErrors(t *testing.T) {
	src := caseDir("minimax-m3/tiny")
	ts := readAll(t, src)
	var out []safetensors.WriteTensor
	for _, x := range ts {
		switch x.Name {
		case "model.layers.1.self_attn.indexer.k_proj.weight":
			continue // missing
		case "model.layers.2.mlp.gate.weight":
			x.Shape = []int{4, 128} // same bytes, wrong shape
		case "model.layers.3.self_attn.q_norm.weight":
			x.Data = append([]byte(nil), x.Data...)
			copy(x.Data[4:], float32Bytes(float32(math.NaN())))
		case "model.layers.0.mlp.down_proj.weight":
			x.DType = safetensors.I32
		}
		out = append(out, x)
	}
	out = append(out, safetensors.WriteTensor{Name: "model.layers.0.self_attn.indexer.q_proj.weight", DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)},
		safetensors.WriteTensor{Name: "model.mtp.0.proj.weight", DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)}) // ignored, as transformers does
	dir := t.TempDir()
	cfg, _ := os.ReadFile(filepath.Join(src, "config.json"))
	os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644)
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), out, nil); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir, cpu.New(1))
	if err == nil {
		t.Fatal("a broken checkpoint loaded")
	}
	for _, want := range []string{
		`missing tensor "model.layers.1.self_attn.indexer.k_proj.weight"`,
		`"model.layers.2.mlp.gate.weight": shape [4 128], want [8 64]`,
		`"model.layers.3.self_attn.q_norm.weight": element 1 is NaN`,
		`"model.layers.0.mlp.down_proj.weight": dtype I32`,
		`unexpected tensor "model.layers.0.self_attn.indexer.q_proj.weight"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %s:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "mtp") || !strings.Contains(err.Error(), "5 problems") {
		t.Errorf("want exactly the 5 problems, the MTP tensor ignored:\n%v", err)
	}
}

func float32Bytes(v float32) []byte {
	b, _ := safetensors.EncodeFloat32s(safetensors.F32, []float32{v})
	return b
}

// TestSyntheticHub: WriteSynthetic writes the Hub's naming for the Hub's
// config spelling, and the model loads and runs it.
func TestSyntheticHub(t *testing.T) {
	cfg, err := os.ReadFile(filepath.Join("testdata", "hub-small-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteSynthetic(dir, cfg, safetensors.BF16, 3); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir, cpu.New(1))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if DetectNaming(m.ck) != Hub || m.W.Layers[1].Attn.Indexer == nil || m.W.Layers[0].Dense == nil {
		t.Fatalf("naming %v, layers %+v", DetectNaming(m.ck), m.W.Layers[:2])
	}
	ids := make([]int32, 40)
	for i := range ids {
		ids[i] = int32(i * 7 % 256)
	}
	lg, err := golden.Feed(context.Background(), m, ids, []int{len(ids)})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range lg {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("logit %d is %v", i, v)
		}
	}
}
