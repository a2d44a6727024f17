package servertest

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-inference/strata/model/kimilinear"
)

// kimiAdded are the Kimi tokenizer's added tokens: [BOS], [EOS], the turn
// markers (special; <|im_end|> is id 2, the model's EOS), then the markup
// of tool calls and reasoning (not special, so that decoding keeps them).
var kimiAdded = []AddedToken{
	{"[BOS]", true}, {"[EOS]", true}, {"<|im_end|>", true}, {"<|im_user|>", true},
	{"<|im_assistant|>", true}, {"<|im_system|>", true}, {"<|im_middle|>", true},
	{"<|tool_calls_section_begin|>", false}, {"<|tool_calls_section_end|>", false},
	{"<|tool_call_begin|>", false}, {"<|tool_call_argument_begin|>", false}, {"<|tool_call_end|>", false},
	{"<think>", false}, {"</think>", false},
}

// KimiLinearConfig is the config.json of a small random-weight Kimi Linear
// (the golden case's shape: KDA and MLA 3:1 over 8 layers, a dense layer
// then MoE) whose vocabulary of 328 is the Kimi tokenizer's.
const KimiLinearConfig = `{
  "architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear",
  "vocab_size": 328, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 8,
  "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention",
    "linear_attention", "linear_attention", "linear_attention", "full_attention"],
  "mlp_layer_types": ["dense", "sparse", "sparse", "sparse", "sparse", "sparse", "sparse", "sparse"],
  "linear_num_heads": 4, "linear_head_dim": 16, "linear_conv_kernel_dim": 4,
  "num_attention_heads": 4, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "q_lora_rank": null,
  "num_experts": 6, "num_experts_per_token": 2, "num_shared_experts": 1, "moe_intermediate_size": 16,
  "routed_scaling_factor": 2.446, "moe_renormalize": true, "num_expert_group": 1, "topk_group": 1,
  "rms_norm_eps": 1e-5, "model_max_length": 4096, "bos_token_id": 0, "eos_token_id": 2,
  "tie_word_embeddings": false, "hidden_act": "silu"
}`

// WriteKimiLinear writes the synthetic Kimi Linear into dir: config.json, a
// random-weight checkpoint (kimilinear.WriteSynthetic), the Kimi tokenizer
// (the synthetic tokenizer's bytes and merges after Kimi's added tokens;
// no BOS added: Kimi's template writes none) and the Kimi chat template
// this repository tests with (tokenizer/chat/testdata/kimi-linear/
// chat_template.jinja).
func WriteKimiLinear(dir string, seed uint64) error {
	if err := kimilinear.WriteSynthetic(dir, []byte(KimiLinearConfig), kimilinear.SyntheticOptions{Seed: seed}); err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	tj, cj, err := TokenizerWith(kimiAdded, map[string]any{
		"add_bos_token": false, "bos_token": "[BOS]", "eos_token": "<|im_end|>", "tokenizer_class": "PreTrainedTokenizerFast",
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
	tmpl, err := os.ReadFile(filepath.Join(root, "tokenizer", "chat", "testdata", "kimi-linear", "chat_template.jinja"))
	if err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "chat_template.jinja"), tmpl, 0o644)
}
