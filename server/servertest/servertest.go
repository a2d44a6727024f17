// Package servertest provides the models the server's tests and the serving
// benchmark run on: the model that ships with strata when it is present, and
// otherwise a tiny random-weight DeepSeek-V4 with a matching tokenizer,
// written on the spot.
//
// The choice is explicit: ModelDir reports which model it picked, and callers
// that need a specific one call ShippedModelDir or WriteSynthetic directly.
package servertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-inference/strata/model/deepseekv4"
)

// ShippedModel is the folder of the model that ships with strata, relative to
// the repository root.
const ShippedModel = "models/strata-kjv"

// SyntheticConfig is the Hub-style config.json of the synthetic model: a
// DeepSeek-V4 with every attention kind (window, CSA at rate 4, HCA at rate
// 16), hash-routed and learned MoE layers, FP8 weights and FP4 experts as
// released, one MTP layer, hidden size 64 and a vocabulary of 320, which is
// exactly the synthetic tokenizer's.
const SyntheticConfig = `{
  "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
  "vocab_size": 320, "hidden_size": 64, "num_hidden_layers": 3,
  "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "qk_rope_head_dim": 8,
  "q_lora_rank": 32, "o_groups": 2, "o_lora_rank": 16,
  "index_n_heads": 4, "index_head_dim": 16, "index_topk": 4,
  "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "n_shared_experts": 1,
  "norm_topk_prob": true, "num_hash_layers": 1, "compress_ratios": [0, 4, 16, 0], "sliding_window": 16,
  "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "rms_norm_eps": 1e-6,
  "routed_scaling_factor": 1.5, "swiglu_limit": 10.0, "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc",
  "rope_theta": 10000, "compress_rope_theta": 160000,
  "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1},
  "max_position_embeddings": 4096, "num_nextn_predict_layers": 1,
  "bos_token_id": 0, "eos_token_id": 1, "tie_word_embeddings": false, "hidden_act": "silu",
  "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
  "expert_dtype": "fp4"
}`

// Special tokens of the synthetic tokenizer: DeepSeek-V4's chat markers, so
// that prompts rendered by chat.EncodeDeepSeekV4 encode them as single
// tokens. The first four are special (BOS is id 0 and EOS id 1, as in
// SyntheticConfig); <think> and </think> are ordinary added tokens, as in
// DeepSeek's own tokenizers, so that decoding never drops them.
var syntheticAdded = []struct {
	content string
	special bool
}{
	{"<｜begin▁of▁sentence｜>", true},
	{"<｜end▁of▁sentence｜>", true},
	{"<｜User｜>", true},
	{"<｜Assistant｜>", true},
	{"<think>", false},
	{"</think>", false},
}

// syntheticMerges are the synthetic tokenizer's BPE merges, in rank order:
// common English letter pairs, so that ordinary text takes fewer tokens
// than bytes.
var syntheticMerges = [][2]string{
	{"t", "h"}, {"h", "e"}, {"i", "n"}, {"e", "r"}, {"a", "n"}, {"r", "e"}, {"o", "n"}, {"a", "t"},
	{"e", "n"}, {"n", "d"}, {"t", "i"}, {"e", "s"}, {"o", "r"}, {"t", "e"}, {"o", "f"}, {"e", "d"},
	{"i", "s"}, {"i", "t"}, {"a", "l"}, {"a", "r"}, {"s", "t"}, {"t", "o"}, {"n", "t"}, {"n", "g"},
	{"s", "e"}, {"h", "a"}, {"a", "s"}, {"o", "u"}, {"i", "o"}, {"l", "e"}, {"v", "e"}, {"c", "o"},
	{"m", "e"}, {"d", "e"}, {"h", "i"}, {"r", "i"}, {"r", "o"}, {"i", "c"}, {"n", "e"}, {"e", "a"},
	{"r", "a"}, {"c", "e"}, {"l", "i"}, {"c", "h"}, {"l", "l"}, {"b", "e"}, {"m", "a"}, {"s", "i"},
	{"o", "m"}, {"u", "r"}, {"Ġ", "t"}, {"Ġ", "a"}, {"Ġ", "s"}, {"Ġ", "w"}, {"Ġ", "o"}, {"Ġ", "i"},
	{"Ġ", "c"}, {"Ġ", "h"},
}

// byteLevel is GPT-2's mapping of bytes to printable runes, the spelling of
// byte-level BPE vocabularies.
func byteLevel() (m [256]rune) {
	n := rune(0)
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[b] = rune(b)
		} else {
			m[b] = 256 + n
			n++
		}
	}
	return m
}

// SyntheticTokenizer returns the synthetic tokenizer's tokenizer.json and
// tokenizer_config.json: byte-level BPE over all 256 bytes with the merges
// above, DeepSeek-V4's chat markers as added tokens at ids 0-5, 320 ids in
// all, add_bos_token true and no chat template.
func SyntheticTokenizer() (tokenizerJSON, configJSON []byte, err error) {
	var added []AddedToken
	for _, a := range syntheticAdded {
		added = append(added, AddedToken{Content: a.content, Special: a.special})
	}
	return TokenizerWith(added, map[string]any{
		"add_bos_token":   true,
		"bos_token":       syntheticAdded[0].content,
		"eos_token":       syntheticAdded[1].content,
		"tokenizer_class": "PreTrainedTokenizerFast",
	})
}

// AddedToken is one added token of a synthetic tokenizer: special tokens
// are dropped when decoding with special tokens skipped.
type AddedToken struct {
	Content string
	Special bool
}

// TokenizerWith returns the tokenizer.json of a byte-level BPE tokenizer
// over all 256 bytes with the synthetic merges, the added tokens first
// (ids 0, 1, ...), the bytes and the merges after them (len(added) + 314
// ids in all), and tokenizer_config.json holding config.
func TokenizerWith(added []AddedToken, config map[string]any) (tokenizerJSON, configJSON []byte, err error) {
	vocab := map[string]int{}
	next := len(added)
	for _, r := range byteLevel() {
		vocab[string(r)] = next
		next++
	}
	merges := make([]string, 0, len(syntheticMerges))
	for _, m := range syntheticMerges {
		vocab[m[0]+m[1]] = next
		next++
		merges = append(merges, m[0]+" "+m[1])
	}
	type addedJSON struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var addedTokens []addedJSON
	for i, a := range added {
		addedTokens = append(addedTokens, addedJSON{ID: i, Content: a.Content, Special: a.Special})
	}
	byteLevelPre := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	tok := map[string]any{
		"version":        "1.0",
		"truncation":     nil,
		"padding":        nil,
		"added_tokens":   addedTokens,
		"normalizer":     nil,
		"pre_tokenizer":  byteLevelPre,
		"post_processor": nil,
		"decoder":        byteLevelPre,
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false,
			"vocab": vocab, "merges": merges,
		},
	}
	if tokenizerJSON, err = json.MarshalIndent(tok, "", " "); err != nil {
		return nil, nil, err
	}
	if configJSON, err = json.MarshalIndent(config, "", " "); err != nil {
		return nil, nil, err
	}
	return tokenizerJSON, configJSON, nil
}

// WriteSynthetic writes the synthetic model into dir: config.json and a
// random-weight checkpoint (deepseekv4.WriteSynthetic with SyntheticConfig
// and seed), tokenizer.json and tokenizer_config.json.
func WriteSynthetic(dir string, seed uint64) error {
	if err := deepseekv4.WriteSynthetic(dir, []byte(SyntheticConfig), seed); err != nil {
		return fmt.Errorf("servertest: writing the synthetic model to %s: %w", dir, err)
	}
	tj, cj, err := SyntheticTokenizer()
	if err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tj, 0o644); err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cj, 0o644); err != nil {
		return fmt.Errorf("servertest: %w", err)
	}
	return nil
}

// RepoRoot returns the repository root: the nearest folder at or above the
// working directory that holds go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("servertest: no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// ShippedModelDir returns the shipped model's folder and whether it is
// complete: model.safetensors, config.json and tokenizer.json all exist.
func ShippedModelDir() (string, bool) {
	root, err := RepoRoot()
	if err != nil {
		return "", false
	}
	dir := filepath.Join(root, ShippedModel)
	for _, f := range []string{"model.safetensors", "config.json", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return dir, false
		}
	}
	return dir, true
}

// ModelDir returns the folder of the model to serve: the shipped model when
// ShippedModelDir finds it complete, otherwise the synthetic model (seed 1)
// written into tmp. shipped says which.
func ModelDir(tmp string) (dir string, shipped bool, err error) {
	if dir, ok := ShippedModelDir(); ok {
		return dir, true, nil
	}
	if err := WriteSynthetic(tmp, 1); err != nil {
		return "", false, err
	}
	return tmp, false, nil
}

// byteLevelTokenizer is TokenizerWith over a list of (content, special)
// pairs.
func byteLevelTokenizer(list []struct {
	content string
	special bool
}, config map[string]any) (tokenizerJSON, configJSON []byte, err error) {
	added := make([]AddedToken, len(list))
	for i, a := range list {
		added[i] = AddedToken{Content: a.content, Special: a.special}
	}
	return TokenizerWith(added, config)
}
