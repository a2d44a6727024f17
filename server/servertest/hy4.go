package servertest

import (
	"fmt"

	"github.com/strata-inference/strata/model/hy4"
)

// HY4Config is the config.json of a small random-weight HY4 (MLA with
// sinks and output gates; an indexer in its first two layers, shared by
// the third; 4 iHC channels; a dense and two MoE layers) whose vocabulary
// of 320 is the synthetic tokenizer's.
const HY4Config = `{
  "architectures": ["HYV4ForCausalLM"], "model_type": "hy_v4",
  "vocab_size": 320, "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 16,
  "num_hidden_layers": 3, "mlp_layer_types": ["dense", "sparse", "sparse"], "indexer_types": ["full", "full", "shared"],
  "num_attention_heads": 2, "num_key_value_heads": 2, "q_lora_rank": 32, "kv_lora_rank": 32,
  "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "head_dim": 8,
  "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1, "n_group": 1, "topk_group": 1,
  "routed_scaling_factor": 2.827, "norm_topk_prob": true, "swiglu_limit": 10.0,
  "index_topk": 8, "index_head_dim": 16, "index_n_heads": 4, "rms_norm_eps": 1e-5,
  "hc_mult": 4, "hc_magnitude": 2.0, "hc_eps": 1e-6,
  "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "max_position_embeddings": 4096,
  "bos_token_id": 0, "eos_token_id": 1, "tie_word_embeddings": false, "hidden_act": "silu"
}`

// HY4TestTemplate is the chat template WriteHY4 ships in
// tokenizer_config.json. HY4's own template is not available here (neither
// its golden case nor spec/models/hy4.md gives one), so this is a minimal
// stand-in over the synthetic tokenizer's markers: it exercises serving an
// HY4 checkpoint through the template its tokenizer config carries, not
// HY4's prompt format.
const HY4TestTemplate = `{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}<｜User｜>{{ m['content'] }}{% elif m['role'] == 'assistant' %}<｜Assistant｜>{{ m['content'] }}{{ eos_token }}{% else %}{{ m['content'] }}{% endif %}{% endfor %}{% if add_generation_prompt %}<｜Assistant｜>{% endif %}`

// WriteHY4 writes the synthetic HY4 into dir: config.json, a random-weight
// checkpoint (hy4.WriteSynthetic), and the synthetic tokenizer with
// HY4TestTemplate as its chat template.
func WriteHY4(dir string, seed uint64) error {
	if err := hy4.WriteSynthetic(dir, []byte(HY4Config), seed); err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	var added []AddedToken
	for _, a := range syntheticAdded {
		added = append(added, AddedToken{Content: a.content, Special: a.special})
	}
	tj, cj, err := TokenizerWith(added, map[string]any{
		"add_bos_token":   false, // the template writes it
		"bos_token":       syntheticAdded[0].content,
		"eos_token":       syntheticAdded[1].content,
		"tokenizer_class": "PreTrainedTokenizerFast",
		"chat_template":   HY4TestTemplate,
	})
	if err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	return writeTokenizer(dir, tj, cj)
}
