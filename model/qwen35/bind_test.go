package qwen35

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/safetensors"
)

// rewriteCheckpoint copies case src into a temp dir, passing every tensor
// through edit (which may rename, drop, reshape or add tensors) and the
// config through editCfg (nil keeps it).
func rewriteCheckpoint(t *testing.T, src string, edit func(ts []safetensors.WriteTensor) []safetensors.WriteTensor, editCfg func(map[string]any) map[string]any) string {
	t.Helper()
	ck, err := safetensors.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var ts []safetensors.WriteTensor
	for _, n := range ck.Names() {
		x, _ := ck.Tensor(n)
		ts = append(ts, safetensors.WriteTensor{Name: n, DType: x.DType, Shape: x.Shape, Data: append([]byte(nil), x.Data...)})
	}
	dir := t.TempDir()
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), edit(ts), nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if editCfg != nil {
		var m map[string]any
		if err := json.Unmarshal(cfg, &m); err != nil {
			t.Fatal(err)
		}
		if cfg, err = json.Marshal(editCfg(m)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func f32Tensor(name string, shape []int, fill func(i int) float32) safetensors.WriteTensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	data := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(fill(i)))
	}
	return safetensors.WriteTensor{Name: name, DType: "F32", Shape: shape, Data: data}
}

// logitsOf loads dir and returns the logits of every position of ids fed
// in chunks of 13.
func logitsOf(t *testing.T, dir string, ids []int32) []float32 {
	t.Helper()
	m, err := Load(dir, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var feeds []int
	for left := len(ids); left > 0; left -= 13 {
		feeds = append(feeds, min(13, left))
	}
	lg, _ := feed(t, m, ids, feeds)
	return lg
}

var testIDs = []int32{3, 17, 5, 99, 42, 1, 7, 7, 64, 2, 11, 150, 8, 9, 30, 31, 77, 12, 0, 5, 6}

// TestBindReportsEveryProblem: one error names every missing, unexpected,
// mis-shaped, mistyped and non-finite tensor.
func TestBindReportsEveryProblem(t *testing.T) {
	dir := rewriteCheckpoint(t, caseDir("qwen3.5-moe/tiny"), func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		var out []safetensors.WriteTensor
		for _, x := range ts {
			switch x.Name {
			case "model.layers.1.linear_attn.in_proj_z.weight": // missing
				continue
			case "model.layers.3.self_attn.q_norm.weight": // wrong shape
				x.Shape = []int{x.Shape[0] / 2}
				x.Data = x.Data[:len(x.Data)/2]
			case "model.layers.2.mlp.experts.5.down_proj.weight": // wrong dtype
				x.DType = "I32"
			case "model.layers.0.linear_attn.out_proj.weight": // NaN
				binary.LittleEndian.PutUint32(x.Data[4*77:], math.Float32bits(float32(math.NaN())))
			case "model.layers.4.linear_attn.A_log": // +Inf in a vector
				binary.LittleEndian.PutUint32(x.Data[4:], math.Float32bits(float32(math.Inf(1))))
			case "model.layers.7.self_attn.k_proj.weight": // BF16 with an Inf
				bf := make([]byte, len(x.Data)/2)
				for i := range len(bf) / 2 {
					copy(bf[2*i:], x.Data[4*i+2:4*i+4])
				}
				binary.LittleEndian.PutUint16(bf[2*301:], 0xFF80) // -Inf
				x.DType, x.Data = "BF16", bf
			}
			out = append(out, x)
		}
		return append(out, f32Tensor("model.layers.0.linear_attn.bogus", []int{1}, func(int) float32 { return 0 }))
	}, nil)
	_, err := Load(dir, cpu.New(0))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`missing tensor "model.layers.1.linear_attn.in_proj_z.weight"`,
		`tensor "model.layers.3.self_attn.q_norm.weight": shape [16] has 16 elements, want 32`,
		`tensor "model.layers.2.mlp.experts.5.down_proj.weight": dtype I32 is not a supported weight format`,
		`tensor "model.layers.0.linear_attn.out_proj.weight": element 77 is not finite`,
		`tensor "model.layers.4.linear_attn.A_log": element 1 is +Inf`,
		`tensor "model.layers.7.self_attn.k_proj.weight": element 301 is not finite`,
		`unexpected tensor "model.layers.0.linear_attn.bogus"`,
		"7 problems",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// toHub rewrites a text-only case as the Hub's multimodal checkpoint:
// tensors under model.language_model., a vision tower, an MTP module, and
// the text config nested under text_config.
func toHub(t *testing.T, src string, moe bool) string {
	return rewriteCheckpoint(t, src, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		var out []safetensors.WriteTensor
		for _, x := range ts {
			if rest, ok := strings.CutPrefix(x.Name, "model."); ok {
				x.Name = "model.language_model." + rest
			}
			out = append(out, x)
		}
		out = append(out, f32Tensor("model.visual.blocks.0.attn.qkv.weight", []int{12, 4}, func(i int) float32 { return float32(i) }))
		return append(out, mtpTensors(ts, moe)...)
	}, func(c map[string]any) map[string]any {
		arch := "Qwen3_5ForConditionalGeneration"
		mt := "qwen3_5"
		if moe {
			arch, mt = "Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe"
		}
		delete(c, "architectures")
		c["mtp_num_hidden_layers"] = 1
		return map[string]any{"architectures": []string{arch}, "model_type": mt, "text_config": c,
			"vision_config": map[string]any{"depth": 1}, "tie_word_embeddings": false}
	})
}

// mtpTensors makes an MTP module from layer 3 (a full-attention layer) of a
// checkpoint, plus fc and norms.
func mtpTensors(ts []safetensors.WriteTensor, moe bool) []safetensors.WriteTensor {
	var out []safetensors.WriteTensor
	D := 64
	for _, x := range ts {
		if rest, ok := strings.CutPrefix(x.Name, "model.layers.3."); ok {
			x.Name = "mtp.layers.0." + rest
			out = append(out, x)
		}
	}
	out = append(out,
		f32Tensor("mtp.fc.weight", []int{D, 2 * D}, func(i int) float32 { return float32(i%7) / 50 }),
		f32Tensor("mtp.pre_fc_norm_embedding.weight", []int{D}, func(int) float32 { return 0.1 }),
		f32Tensor("mtp.pre_fc_norm_hidden.weight", []int{D}, func(int) float32 { return -0.1 }),
		f32Tensor("mtp.norm.weight", []int{D}, func(int) float32 { return 0 }),
	)
	return out
}

// TestBindHubNaming: the same weights under the multimodal checkpoint's
// names (with a vision tower and an MTP module beside them) give the same
// logits, bit for bit, and the MTP module is bound.
func TestBindHubNaming(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			moe := strings.Contains(name, "moe")
			want := logitsOf(t, caseDir(name), testIDs)
			dir := toHub(t, caseDir(name), moe)
			got := logitsOf(t, dir, testIDs)
			if d := maxAbsDiff(got, want); d != 0 {
				t.Errorf("Hub naming changes the logits by %g", d)
			}
			m, err := Load(dir, cpu.New(0))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if !m.Cfg.Multimodal || m.W.MTP == nil || len(m.W.MTP.Layers) != 1 || m.W.MTP.FC.Cols != 128 ||
				m.W.MTP.Layers[0].Attn == nil || (m.W.MTP.Layers[0].MoE != nil) != moe || m.W.MTP.Norm[0] != 1 {
				t.Errorf("MTP module not bound as expected: %+v", m.W.MTP)
			}
			// Without any mtp.* tensor the module is absent, not an error.
			m2, err := Load(caseDir(name), cpu.New(0))
			if err != nil {
				t.Fatal(err)
			}
			defer m2.Close()
			if m2.W.MTP != nil {
				t.Error("text-only checkpoint has an MTP module")
			}
		})
	}
	// An MTP module with a tensor missing is reported.
	dir := rewriteCheckpoint(t, toHub(t, caseDir("qwen3.5/tiny"), false), func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		var out []safetensors.WriteTensor
		for _, x := range ts {
			if x.Name != "mtp.layers.0.self_attn.v_proj.weight" {
				out = append(out, x)
			}
		}
		return out
	}, nil)
	if _, err := Load(dir, cpu.New(0)); err == nil || !strings.Contains(err.Error(), `missing tensor "mtp.layers.0.self_attn.v_proj.weight"`) {
		t.Errorf("missing MTP tensor: error %v", err)
	}
}

// TestBindFusedExperts: routed experts stored fused (experts.gate_up_proj
// [E, 2I, D], experts.down_proj [E, D, I]) give the same logits as one
// triple per expert.
func TestBindFusedExperts(t *testing.T) {
	src := caseDir("qwen3.5-moe/tiny")
	want := logitsOf(t, src, testIDs)
	dir := rewriteCheckpoint(t, src, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		byName := map[string]safetensors.WriteTensor{}
		var out []safetensors.WriteTensor
		for _, x := range ts {
			if strings.Contains(x.Name, ".mlp.experts.") {
				byName[x.Name] = x
				continue
			}
			out = append(out, x)
		}
		const E, I, D = 8, 16, 64
		for l := range 8 {
			var gu, dn []byte
			for e := range E {
				p := fmt.Sprintf("model.layers.%d.mlp.experts.%d.", l, e)
				gu = append(gu, byName[p+"gate_proj.weight"].Data...)
				gu = append(gu, byName[p+"up_proj.weight"].Data...)
				dn = append(dn, byName[p+"down_proj.weight"].Data...)
			}
			p := fmt.Sprintf("model.layers.%d.mlp.experts.", l)
			out = append(out,
				safetensors.WriteTensor{Name: p + "gate_up_proj", DType: "F32", Shape: []int{E, 2 * I, D}, Data: gu},
				safetensors.WriteTensor{Name: p + "down_proj", DType: "F32", Shape: []int{E, D, I}, Data: dn})
		}
		return out
	}, nil)
	if d := maxAbsDiff(logitsOf(t, dir, testIDs), want); d != 0 {
		t.Errorf("fused experts change the logits by %g", d)
	}
}

// TestBindTiedHead: with tie_word_embeddings the output head is the
// embedding; a stored lm_head.weight must then equal it.
func TestBindTiedHead(t *testing.T) {
	src := caseDir("qwen3.5/tiny")
	tie := func(c map[string]any) map[string]any { c["tie_word_embeddings"] = true; return c }
	dropHead := func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		var out []safetensors.WriteTensor
		for _, x := range ts {
			if x.Name != "lm_head.weight" {
				out = append(out, x)
			}
		}
		return out
	}
	dir := rewriteCheckpoint(t, src, dropHead, tie)
	m, err := Load(dir, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.W.Output != m.W.Embed {
		t.Error("tied head is not the embedding")
	}
	// The same as an untied checkpoint whose lm_head is a copy of the
	// embedding, and not the same as the case's own head.
	lg := logitsOf(t, dir, testIDs)
	copied := rewriteCheckpoint(t, src, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		var embed []byte
		for _, x := range ts {
			if x.Name == "model.embed_tokens.weight" {
				embed = x.Data
			}
		}
		for i := range ts {
			if ts[i].Name == "lm_head.weight" {
				ts[i].Data = append([]byte(nil), embed...)
			}
		}
		return ts
	}, nil)
	if d := maxAbsDiff(lg, logitsOf(t, copied, testIDs)); d != 0 {
		t.Errorf("tied head differs from an untied copy of the embedding by %g", d)
	}
	if maxAbsDiff(lg, logitsOf(t, src, testIDs)) == 0 {
		t.Error("tied and untied heads give the same logits")
	}
	// A stored head that is not the embedding is rejected.
	dir = rewriteCheckpoint(t, src, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor { return ts }, tie)
	if _, err := Load(dir, cpu.New(0)); err == nil || !strings.Contains(err.Error(), "differs from the embedding") {
		t.Errorf("tied with a different lm_head: error %v", err)
	}
}

// TestBindBF16: a checkpoint stored in BF16 gives the logits of the F32
// checkpoint holding the same (bf16-rounded) values.
func TestBindBF16(t *testing.T) {
	src := caseDir("qwen3.5-moe/tiny")
	round := func(bf16 bool) func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		return func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			for i, x := range ts {
				bf := make([]byte, len(x.Data)/2)
				for j := range len(bf) / 2 {
					f := math.Float32frombits(binary.LittleEndian.Uint32(x.Data[4*j:]))
					h := safetensors.Float32ToBF16(f)
					binary.LittleEndian.PutUint16(bf[2*j:], h)
					binary.LittleEndian.PutUint32(x.Data[4*j:], math.Float32bits(safetensors.BF16ToFloat32(h)))
				}
				if bf16 {
					ts[i].DType, ts[i].Data = "BF16", bf
				}
			}
			return ts
		}
	}
	want := logitsOf(t, rewriteCheckpoint(t, src, round(false), nil), testIDs)
	got := logitsOf(t, rewriteCheckpoint(t, src, round(true), nil), testIDs)
	if d := maxAbsDiff(got, want); d > 1e-5 {
		t.Errorf("bf16 storage changes the logits of the same values by %g", d)
	}
}
