package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/plan"
)

// TestInspectEveryArchitecture: inspect summarizes the checkpoint of every
// golden folder and the shipped model: its family, the layer count and
// vocabulary its config.json gives (read here independently), the cache
// plan --config gives, and all its weights bound.
func TestInspectEveryArchitecture(t *testing.T) {
	dirs, err := filepath.Glob(root("testdata/golden/*/tiny"))
	if err != nil {
		t.Fatal(err)
	}
	dirs = append(dirs, root("models/strata-kjv"))
	family := map[string]string{
		"deepseek_v4": "DeepSeek-V4", "deepseek_v32": "DeepSeek-V3.2", "glm_moe_dsa": "GLM-5", "hy_v4": "HY4",
		"gemma4": "Gemma 4", "gemma4_text": "Gemma 4", "qwen3_5": "Qwen3.5", "qwen3_5_text": "Qwen3.5", "qwen3_5_moe": "Qwen3.5",
		"qwen3_5_moe_text": "Qwen3.5", "kimi_linear": "Kimi Linear", "minimax_m3": "MiniMax-M3", "minimax_m3_vl_text": "MiniMax-M3",
	}
	seen := map[string]bool{}
	for _, dir := range dirs {
		t.Run(filepath.Base(filepath.Dir(dir))+"/"+filepath.Base(dir), func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			var c struct {
				ModelType  string `json:"model_type"`
				Layers     int    `json:"num_hidden_layers"`
				Vocab      int    `json:"vocab_size"`
				TextConfig *struct {
					ModelType string `json:"model_type"`
					Layers    int    `json:"num_hidden_layers"`
					Vocab     int    `json:"vocab_size"`
				} `json:"text_config"`
			}
			if err := json.Unmarshal(b, &c); err != nil {
				t.Fatal(err)
			}
			if tc := c.TextConfig; tc != nil {
				c.ModelType, c.Layers, c.Vocab = tc.ModelType, tc.Layers, tc.Vocab
			}
			fam, ok := family[c.ModelType]
			if !ok {
				t.Fatalf("model_type %q: no family in this test's table", c.ModelType)
			}
			seen[fam] = true
			out, err := run(t, "inspect", dir)
			if err != nil {
				t.Fatalf("inspect: %v\n%s", err, out)
			}
			if first, _, _ := strings.Cut(out, "\n"); first != dir+": "+fam {
				t.Errorf("header %q, want %q", first, dir+": "+fam)
			}
			field := func(re string) int {
				m := regexp.MustCompile(re).FindStringSubmatch(out)
				if m == nil {
					t.Fatalf("no %s in\n%s", re, out)
				}
				n, _ := strconv.Atoi(m[1])
				return n
			}
			if n := field(`(?m)^  layers +(\d+),`); n != c.Layers {
				t.Errorf("%d layers, config.json has %d", n, c.Layers)
			}
			if n := strings.Count(out, "\n    "); n < c.Layers {
				t.Errorf("%d detail lines for %d layers", n, c.Layers)
			}
			if n := field(`(?m)^  vocab +(\d+) `); n != c.Vocab {
				t.Errorf("vocab %d, config.json has %d", n, c.Vocab)
			}
			// The f32 cache is what plan --config says.
			m, err := plan.FromConfigFile(filepath.Join(dir, "config.json"), cache.F32)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("%.1f bytes per token, %s fixed per request", m.BytesPerToken(), plan.HumanBytes(m.FixedBytes()))
			if !regexp.MustCompile(`(?m)^  cache \(f32\) +` + regexp.QuoteMeta(want)).MatchString(out) {
				t.Errorf("no f32 cache line %q in\n%s", want, out)
			}
			if !regexp.MustCompile(`(?m)^  parameters +\S+ in \d+ tensors`).MatchString(out) || !strings.Contains(out, "tensors bound") {
				t.Errorf("no parameters or weights line in\n%s", out)
			}
		})
	}
	for _, f := range family {
		if !seen[f] {
			t.Errorf("no folder of %s", f)
		}
	}
}

// TestInspectErrors: a folder with an unknown model_type, without a
// config, or with a malformed one is an error that says so.
func TestInspectErrors(t *testing.T) {
	unknown := t.TempDir()
	if err := os.WriteFile(filepath.Join(unknown, "config.json"), []byte(`{"model_type": "llama", "architectures": ["LlamaForCausalLM"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "config.json"), []byte(`{"model_type": "qwen3_5",`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{unknown, `model_type "llama"`},
		{unknown, "is not supported"},
		{t.TempDir(), "config.json: no such file"},
		{bad, "unexpected end of JSON input"},
	} {
		out, err := run(t, "inspect", tc.dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want it to say %q\n%s", tc.dir, err, tc.want, out)
		}
	}
	if _, err := run(t, "inspect"); err == nil {
		t.Error("no folder accepted")
	}
}
