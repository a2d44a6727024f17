package servertest

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-inference/strata/model/gemma4"
	"github.com/strata-inference/strata/safetensors"
)

// Gemma4Config is the config.json of the synthetic Gemma 4 model: sliding
// (window 8) and full layers with K=V, a KV-shared layer, per-layer
// embeddings, experts beside the MLP and the logit cap, hidden size 32 and a
// vocabulary of 332: exactly the synthetic Gemma 4 tokenizer's.
const Gemma4Config = `{
  "architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text",
  "vocab_size": 332, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 6,
  "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
  "layer_types": ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"],
  "global_head_dim": 32, "num_global_key_value_heads": 1, "attention_k_eq_v": true,
  "sliding_window": 8, "num_kv_shared_layers": 1, "use_double_wide_mlp": true,
  "hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": 332,
  "enable_moe_block": true, "num_experts": 2, "top_k_experts": 1, "moe_intermediate_size": 8,
  "final_logit_softcapping": 30.0, "max_position_embeddings": 4096, "bos_token_id": 2, "eos_token_id": 1,
  "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}}
}`

// gemma4Added are the synthetic Gemma 4 tokenizer's added tokens, at ids 0
// onward: Gemma's pad, EOS and BOS (ids 0-2, as Gemma4Config says) and its
// chat markup, all special as Gemma's tokenizer holds them.
var gemma4Added = []struct {
	content string
	special bool
}{
	{"<pad>", true}, {"<eos>", true}, {"<bos>", true},
	{"<|turn>", true}, {"<turn|>", true}, {"<|channel>", true}, {"<channel|>", true}, {"<|think|>", true},
	{"<|tool>", true}, {"<tool|>", true}, {"<|tool_call>", true}, {"<tool_call|>", true},
	{"<|tool_response>", true}, {"<tool_response|>", true}, {`<|"|>`, true},
	{"<|image|>", true}, {"<|audio|>", true}, {"<|video|>", true},
}

// Gemma4TurnEnd is the synthetic Gemma 4 tokenizer's id of "<turn|>", which
// generation_config.json lists as an end of sequence beside <eos>.
const Gemma4TurnEnd = 4

// WriteGemma4Synthetic writes a synthetic Gemma 4 model into dir:
// config.json (Gemma4Config) and a random-weight checkpoint
// (gemma4.WriteSynthetic, f32, seed), a byte-level BPE tokenizer whose added
// tokens are Gemma 4's chat markup, generation_config.json (EOS <eos> and
// <turn|>) and Gemma 4's chat template (chat_template.jinja, the copy in
// tokenizer/chat/testdata/gemma4).
func WriteGemma4Synthetic(dir string, seed uint64) error {
	if err := gemma4.WriteSynthetic(dir, []byte(Gemma4Config), safetensors.F32, seed); err != nil {
		return fmt.Errorf("servertest: writing the synthetic Gemma 4 model to %s: %w", dir, err)
	}
	tj, cj, err := byteLevelTokenizer(gemma4Added, map[string]any{
		"add_bos_token": false, "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>",
		"tokenizer_class": "GemmaTokenizer",
	})
	if err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	tmpl, err := os.ReadFile(filepath.Join(root, "tokenizer", "chat", "testdata", "gemma4", "chat_template.jinja"))
	if err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	files := map[string][]byte{
		"tokenizer.json":         tj,
		"tokenizer_config.json":  cj,
		"chat_template.jinja":    tmpl,
		"generation_config.json": fmt.Appendf(nil, `{"bos_token_id": 2, "eos_token_id": [1, %d], "pad_token_id": 0}`, Gemma4TurnEnd),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("servertest: %w", err)
		}
	}
	return nil
}
