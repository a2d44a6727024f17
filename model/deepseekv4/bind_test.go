package deepseekv4

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/safetensors"
)

// rewriteCheckpoint copies case src into a temp dir, passing every tensor
// through edit (which may rename, drop, reshape or add tensors).
func rewriteCheckpoint(t *testing.T, src string, edit func(ts []safetensors.WriteTensor) []safetensors.WriteTensor) string {
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
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBindReportsEveryProblem(t *testing.T) {
	dir := rewriteCheckpoint(t, goldenDir("quantized"), func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		var out []safetensors.WriteTensor
		for _, x := range ts {
			switch x.Name {
			case "layers.1.attn.wkv.scale": // missing scale
				continue
			case "layers.2.attn.q_norm.weight": // wrong shape
				x.Shape = []int{x.Shape[0] / 2}
				x.Data = x.Data[:len(x.Data)/2]
			case "layers.3.ffn.experts.1.w2.weight": // wrong dtype
				x.DType = "I32"
				x.Shape = []int{x.Shape[0], x.Shape[1] / 4}
			}
			out = append(out, x)
		}
		return append(out, safetensors.WriteTensor{Name: "layers.0.attn.bogus", DType: "F32", Shape: []int{1}, Data: make([]byte, 4)})
	})
	_, err := Load(dir, newNaive())
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`missing scale tensor "layers.1.attn.wkv.scale"`,
		`tensor "layers.2.attn.q_norm.weight": shape [64] has 64 elements, want 128`,
		`tensor "layers.3.ffn.experts.1.w2.weight": dtype I32 is not a supported weight format`,
		`unexpected tensor "layers.0.attn.bogus"`,
		"4 problems",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// toModuleNames renames released-style tensors (as transformers saves them)
// to transformers' module names, stacking the routed experts, as spec §2 lists.
func toModuleNames(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
	rename := []struct{ re, to string }{
		{`^head\.weight$`, "lm_head.weight"},
		{`^model\.hc_head\.hc_(fn|base|scale)$`, "model.hc_head.hc_$1"},
		{`\.attn_norm\.`, ".input_layernorm."},
		{`\.ffn_norm\.`, ".post_attention_layernorm."},
		{`\.hc_(attn|ffn)_(fn|base|scale)$`, ".${1}_hc.$2"},
		{`\.attn\.indexer\.compressor\.wkv\.`, ".self_attn.compressor.indexer.kv_proj."},
		{`\.attn\.indexer\.compressor\.wgate\.`, ".self_attn.compressor.indexer.gate_proj."},
		{`\.attn\.indexer\.compressor\.ape$`, ".self_attn.compressor.indexer.position_bias"},
		{`\.attn\.indexer\.compressor\.norm\.`, ".self_attn.compressor.indexer.kv_norm."},
		{`\.attn\.indexer\.wq_b\.`, ".self_attn.compressor.indexer.q_b_proj."},
		{`\.attn\.indexer\.weights_proj\.`, ".self_attn.compressor.indexer.scorer.weights_proj."},
		{`\.attn\.compressor\.wkv\.`, ".self_attn.compressor.kv_proj."},
		{`\.attn\.compressor\.wgate\.`, ".self_attn.compressor.gate_proj."},
		{`\.attn\.compressor\.ape$`, ".self_attn.compressor.position_bias"},
		{`\.attn\.compressor\.norm\.`, ".self_attn.compressor.kv_norm."},
		{`\.attn\.wq_a\.`, ".self_attn.q_a_proj."},
		{`\.attn\.q_norm\.`, ".self_attn.q_a_norm."},
		{`\.attn\.wq_b\.`, ".self_attn.q_b_proj."},
		{`\.attn\.wkv\.`, ".self_attn.kv_proj."},
		{`\.attn\.norm\.`, ".self_attn.kv_norm."},
		{`\.attn\.wo_a\.`, ".self_attn.o_a_proj."},
		{`\.attn\.wo_b\.`, ".self_attn.o_b_proj."},
		{`\.attn\.attn_sink$`, ".self_attn.sinks"},
		{`\.ffn\.gate\.bias$`, ".mlp.gate.e_score_correction_bias"},
		{`\.ffn\.gate\.`, ".mlp.gate."},
		{`\.ffn\.shared_experts\.w1\.`, ".mlp.shared_experts.gate_proj."},
		{`\.ffn\.shared_experts\.w3\.`, ".mlp.shared_experts.up_proj."},
		{`\.ffn\.shared_experts\.w2\.`, ".mlp.shared_experts.down_proj."},
	}
	expert := regexp.MustCompile(`^(model\.layers\.\d+)\.ffn\.experts\.(\d+)\.(w[123])\.weight$`)
	type stack struct{ gu, dn [][]byte }
	stacks := map[string]*stack{}
	var order []string
	var out []safetensors.WriteTensor
	var shapeGU, shapeDN []int
	for _, x := range ts {
		if m := expert.FindStringSubmatch(x.Name); m != nil {
			s := stacks[m[1]]
			if s == nil {
				s = &stack{}
				stacks[m[1]] = s
				order = append(order, m[1])
			}
			var e int
			fmt.Sscan(m[2], &e)
			for len(s.gu) <= e {
				s.gu = append(s.gu, nil)
				s.dn = append(s.dn, nil)
			}
			switch m[3] {
			case "w1":
				s.gu[e] = append(x.Data, s.gu[e]...)
				shapeGU = x.Shape
			case "w3":
				s.gu[e] = append(s.gu[e], x.Data...)
			case "w2":
				s.dn[e] = x.Data
				shapeDN = x.Shape
			}
			continue
		}
		for _, r := range rename {
			x.Name = regexp.MustCompile(r.re).ReplaceAllString(x.Name, r.to)
		}
		out = append(out, x)
	}
	for _, p := range order {
		s := stacks[p]
		var gu, dn []byte
		for e := range s.gu {
			gu = append(gu, s.gu[e]...)
			dn = append(dn, s.dn[e]...)
		}
		E := len(s.gu)
		out = append(out,
			safetensors.WriteTensor{Name: p + ".mlp.experts.gate_up_proj", DType: "F32", Shape: []int{E, 2 * shapeGU[0], shapeGU[1]}, Data: gu},
			safetensors.WriteTensor{Name: p + ".mlp.experts.down_proj", DType: "F32", Shape: []int{E, shapeDN[0], shapeDN[1]}, Data: dn})
	}
	return out
}

// TestModuleNaming runs the tiny case stored under transformers' module names
// (stacked experts and all) and checks it gives exactly the logits of the
// saved naming.
func TestModuleNaming(t *testing.T) {
	src := goldenDir("tiny")
	dir := rewriteCheckpoint(t, src, toModuleNames)
	ck, _ := safetensors.OpenDir(dir)
	if _, ok := ck.Tensor("model.layers.0.self_attn.compressor.indexer.scorer.weights_proj.weight"); !ok {
		t.Fatalf("rewrite did not produce module names: %v", ck.Names()[:5])
	}
	ck.Close()
	a, err := Load(src, newNaive())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Load(dir, newNaive())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := golden.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	ids := c.InputIDs[:40]
	la, err := golden.Feed(context.Background(), a, ids, []int{40})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := golden.Feed(context.Background(), b, ids, []int{40})
	if err != nil {
		t.Fatal(err)
	}
	if d := golden.MaxAbsDiff(la, lb); d != 0 {
		t.Fatalf("module naming changes logits by %g", d)
	}
}

// TestBindRejectsNonFinite: a NaN in a norm weight, an Inf in an mHC
// scale and a NaN (0xFF) block scale are errors at load that name the
// tensor, whatever the stored float format.
func TestBindRejectsNonFinite(t *testing.T) {
	var normDType, scaleName string
	dir := rewriteCheckpoint(t, goldenDir("quantized"), func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		for i, x := range ts {
			switch {
			case x.Name == "layers.0.attn_norm.weight":
				normDType = string(x.DType)
				ts[i].Data = setNonFinite(t, x, 3, math.NaN())
			case x.Name == "layers.1.hc_ffn_scale":
				ts[i].Data = setNonFinite(t, x, 1, math.Inf(1))
			case scaleName == "" && strings.HasSuffix(x.Name, ".scale") && (x.DType == "F8_E8M0" || x.DType == "U8") && len(x.Data) > 5:
				scaleName = x.Name
				ts[i].Data[5] = 0xFF
			}
		}
		return ts
	})
	if normDType == "" || scaleName == "" {
		t.Fatal("the checkpoint lacks the tensors the test edits")
	}
	_, err := Load(dir, naive{})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`tensor "layers.0.attn_norm.weight": NaN at 3`,
		`tensor "layers.1.hc_ffn_scale": +Inf at 1`,
		`scale tensor "` + scaleName + `": NaN (0xFF) at 5`,
		"3 problems",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	t.Logf("norm stored as %s", normDType)
}

// setNonFinite returns x's data with element i set to v, in x's dtype.
func setNonFinite(t *testing.T, x safetensors.WriteTensor, i int, v float64) []byte {
	t.Helper()
	d := append([]byte(nil), x.Data...)
	switch x.DType {
	case "F32":
		binary.LittleEndian.PutUint32(d[4*i:], math.Float32bits(float32(v)))
	case "BF16":
		binary.LittleEndian.PutUint16(d[2*i:], uint16(math.Float32bits(float32(v))>>16))
	default:
		t.Fatalf("tensor %s is %s", x.Name, x.DType)
	}
	return d
}

// TestBindErrorIsBounded: a config whose hidden_size does not match the
// checkpoint fails every tensor; the error lists the first problems and
// counts the rest instead of listing hundreds of lines.
func TestBindErrorIsBounded(t *testing.T) {
	dir := rewriteCheckpoint(t, goldenDir("quantized"), func(ts []safetensors.WriteTensor) []safetensors.WriteTensor { return ts })
	cfgPath := filepath.Join(dir, "config.json")
	data, _ := os.ReadFile(cfgPath)
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["hidden_size"] = cfg["hidden_size"].(float64) * 2
	data, _ = json.Marshal(cfg)
	os.WriteFile(cfgPath, data, 0o644)
	_, err := Load(dir, naive{})
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	m := regexp.MustCompile(`(\d+) problems`).FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("no count in %q", lines[0])
	}
	var n int
	fmt.Sscan(m[1], &n)
	if n <= maxReported || len(lines) != maxReported+2 || lines[len(lines)-1] != fmt.Sprintf("… and %d more problems", n-maxReported) {
		t.Errorf("%d problems in %d lines:\n%v", n, len(lines), err)
	}
}
