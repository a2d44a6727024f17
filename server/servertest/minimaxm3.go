package servertest

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-inference/strata/model/minimaxm3"
	"github.com/strata-inference/strata/safetensors"
)

// MiniMaxM3Config is the config.json of a small random-weight MiniMax-M3
// (a full and two MSA layers with blocks of 4, two kept, so that chats of a
// few dozen tokens already drop blocks; a dense and two MoE layers) whose
// vocabulary of 321 is the MiniMax tokenizer's.
const MiniMaxM3Config = `{
  "architectures": ["MiniMaxM3VLForCausalLM"], "model_type": "minimax_m3_vl_text",
  "vocab_size": 321, "hidden_size": 32, "num_hidden_layers": 3,
  "layer_types": ["full_attention", "minimax_m3_sparse", "minimax_m3_sparse"],
  "mlp_layer_types": ["dense", "sparse", "sparse"],
  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
  "rope_parameters": {"rope_type": "default", "rope_theta": 5000000.0, "partial_rotary_factor": 0.5},
  "index_n_heads": 2, "index_head_dim": 16, "index_block_size": 4, "index_topk_blocks": 2, "index_local_blocks": 1,
  "dense_intermediate_size": 48, "intermediate_size": 8, "shared_intermediate_size": 8,
  "num_local_experts": 4, "num_experts_per_tok": 2, "routed_scaling_factor": 2.0,
  "swiglu_alpha": 1.702, "swiglu_limit": 7.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 4096,
  "bos_token_id": 0, "eos_token_id": 1, "tie_word_embeddings": false
}`

// miniMaxAdded are the MiniMax tokenizer's added tokens: the conversation
// and turn markers (special; "[e~[" is id 1, the model's EOS), then the
// markup of reasoning and tool calls (not special, so that decoding keeps
// them).
var miniMaxAdded = []AddedToken{
	{"]~!b[", true}, {"[e~[", true}, {"]~b]", true},
	{"<think>", false}, {"</think>", false}, {"<minimax:tool_call>", false}, {"</minimax:tool_call>", false},
}

// WriteMiniMaxM3 writes the synthetic MiniMax-M3 into dir: config.json
// (MiniMaxM3Config), a random-weight checkpoint (minimaxm3.WriteSynthetic,
// f32), the MiniMax tokenizer and the MiniMax-M3 chat template
// (chat_template.jinja, the copy in tokenizer/chat/testdata/minimax-m3).
func WriteMiniMaxM3(dir string, seed uint64) error {
	if err := minimaxm3.WriteSynthetic(dir, []byte(MiniMaxM3Config), safetensors.F32, seed); err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	tj, cj, err := TokenizerWith(miniMaxAdded, map[string]any{
		"add_bos_token": false, "bos_token": "]~!b[", "eos_token": "[e~[", "tokenizer_class": "GPT2Tokenizer",
	})
	if err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	tmpl, err := os.ReadFile(filepath.Join(root, "tokenizer", "chat", "testdata", "minimax-m3", "chat_template.jinja"))
	if err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	for name, b := range map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": cj, "chat_template.jinja": tmpl} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("servertest: %w", err)
		}
	}
	return nil
}
