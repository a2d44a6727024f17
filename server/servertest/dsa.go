package servertest

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-inference/strata/model/deepseekv32"
	"github.com/strata-inference/strata/model/dsa"
	"github.com/strata-inference/strata/model/glm5"
)

// DeepSeekV32Config is the config.json of a small random-weight
// DeepSeek-V3.2 (MLA with an indexer in both layers, a dense and an MoE
// layer with group-limited routing, YaRN) whose vocabulary of 320 is the
// synthetic tokenizer's: DeepSeek-V3.2's chat markers are DeepSeek-V4's.
const DeepSeekV32Config = `{
  "architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
  "vocab_size": 320, "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 16,
  "num_hidden_layers": 2, "mlp_layer_types": ["dense", "sparse"],
  "num_attention_heads": 2, "num_key_value_heads": 2, "q_lora_rank": 32, "kv_lora_rank": 32,
  "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
  "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1, "n_group": 2, "topk_group": 1,
  "routed_scaling_factor": 2.5, "norm_topk_prob": true,
  "index_topk": 8, "index_head_dim": 16, "index_n_heads": 4, "rms_norm_eps": 1e-6,
  "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024, "mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1},
  "rope_theta": 10000, "max_position_embeddings": 4096,
  "bos_token_id": 0, "eos_token_id": 1, "tie_word_embeddings": false, "hidden_act": "silu"
}`

// WriteDeepSeekV32 writes the synthetic DeepSeek-V3.2 into dir: config.json,
// a random-weight checkpoint (dsa.WriteSynthetic), and the synthetic
// tokenizer.
func WriteDeepSeekV32(dir string, seed uint64) error {
	if err := dsa.WriteSynthetic(dir, []byte(DeepSeekV32Config), &deepseekv32.Family, seed); err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	tj, cj, err := SyntheticTokenizer()
	if err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	return writeTokenizer(dir, tj, cj)
}

// glmAdded are the GLM tokenizer's added tokens: its turn markers
// (special; <|endoftext|> is id 6, the model's EOS), then the markup of
// reasoning and tool calls (not special, so that decoding keeps them).
var glmAdded = []AddedToken{
	{"[gMASK]", true}, {"<sop>", true}, {"<|system|>", true}, {"<|user|>", true},
	{"<|assistant|>", true}, {"<|observation|>", true}, {"<|endoftext|>", true},
	{"<think>", false}, {"</think>", false}, {"<tool_call>", false}, {"</tool_call>", false},
	{"<arg_key>", false}, {"</arg_key>", false}, {"<arg_value>", false}, {"</arg_value>", false},
	{"<tool_response>", false}, {"</tool_response>", false},
}

// GLM5Config is the config.json of a small random-weight GLM-5 (an indexer
// in its first layer, shared by its second) whose vocabulary of 331 is the
// GLM tokenizer's.
const GLM5Config = `{
  "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa",
  "vocab_size": 331, "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 16,
  "num_hidden_layers": 2, "mlp_layer_types": ["dense", "sparse"], "indexer_types": ["full", "shared"],
  "num_attention_heads": 2, "num_key_value_heads": 2, "q_lora_rank": 32, "kv_lora_rank": 32,
  "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
  "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1, "n_group": 1, "topk_group": 1,
  "routed_scaling_factor": 2.5, "norm_topk_prob": true,
  "index_topk": 8, "index_head_dim": 16, "index_n_heads": 4, "rms_norm_eps": 1e-5,
  "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "max_position_embeddings": 4096,
  "bos_token_id": null, "eos_token_id": 6, "tie_word_embeddings": false, "hidden_act": "silu"
}`

// WriteGLM5 writes the synthetic GLM-5 into dir: config.json, a
// random-weight checkpoint, the GLM tokenizer (the synthetic tokenizer's
// bytes and merges after GLM's added tokens; no BOS added: the template
// writes [gMASK]<sop>) and the GLM chat template this repository tests
// with (tokenizer/chat/testdata/glm-5/chat_template.jinja).
func WriteGLM5(dir string, seed uint64) error {
	if err := dsa.WriteSynthetic(dir, []byte(GLM5Config), &glm5.Family, seed); err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	tj, cj, err := TokenizerWith(glmAdded, map[string]any{
		"add_bos_token": false, "eos_token": "<|endoftext|>", "tokenizer_class": "PreTrainedTokenizerFast",
	})
	if err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	if err := writeTokenizer(dir, tj, cj); err != nil {
		return err
	}
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	tmpl, err := os.ReadFile(filepath.Join(root, "tokenizer", "chat", "testdata", "glm-5", "chat_template.jinja"))
	if err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "chat_template.jinja"), tmpl, 0o644)
}

func writeTokenizer(dir string, tokenizerJSON, configJSON []byte) error {
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tokenizerJSON, 0o644); err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), configJSON, 0o644); err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	return nil
}
