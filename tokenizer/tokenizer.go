// Package tokenizer implements byte-level BPE tokenizers loaded from
// Hugging Face tokenizer.json files, as used by the DeepSeek and Qwen model
// families and by plain GPT-2-style tokenizers.
//
// # Pipeline
//
// Encode follows the Hugging Face tokenizers pipeline:
//
//  1. Added tokens whose "normalized" flag is false are found in the raw text
//     (leftmost-longest match, honouring lstrip, rstrip and single_word).
//  2. The text between them is normalized (NFC, NFD, NFKC, NFKD, Lowercase,
//     Replace, Strip, Prepend, Sequence).
//  3. Added tokens whose "normalized" flag is true are found in the
//     normalized text.
//  4. The remaining text is pre-tokenized (Sequence, Split with a regular
//     expression or a literal string and any split behaviour, Digits,
//     ByteLevel with or without its GPT-2 regular expression; as in Hugging
//     Face, ByteLevel's add_prefix_space applies to every piece it receives,
//     so to every piece of text between added tokens when it comes first).
//     Split patterns are Oniguruma-style regular expressions with lookaround;
//     they are run with github.com/dlclark/regexp2, except the patterns of
//     GPT-2, Qwen2/2.5/3, Qwen3.5, Llama 3 and DeepSeek-V3, which use
//     hand-written matchers that find the same matches much faster. As in
//     Oniguruma (and so Hugging Face tokenizers), \s is Unicode White_Space,
//     which includes U+0085 but not U+FEFF (JavaScript's \s is the other way
//     round).
//  5. Each pre-token is mapped to bytes and encoded with the BPE model
//     (merge ranks, optional ignore_merges and unk token). Results are cached
//     per pre-token in a bounded per-Tokenizer cache.
//
// Post-processors are parsed but never applied: Encode never inserts BOS,
// EOS or any other template token. Callers that need them (for example to
// honour add_bos_token from tokenizer_config.json) use BOS, EOS and AddBOS.
//
// Only byte-level BPE is supported: the pre-tokenizer must end with
// ByteLevel, the decoder must be ByteLevel (optionally inside a Sequence), and
// the model must be BPE without byte_fallback, dropout,
// continuing_subword_prefix or end_of_word_suffix. Anything else is reported
// as an error by Load naming the file and the JSON field.
//
// # Decoding
//
// Decode maps ids back to bytes (added tokens decode to their content
// verbatim) and converts the bytes to a string, replacing each maximal
// invalid UTF-8 subsequence with U+FFFD as Rust's String::from_utf8_lossy and
// the WHATWG TextDecoder do. Decoder does the same incrementally: the
// concatenation of everything Add and Flush return equals Decode of the same
// ids, and no returned string ever ends inside a UTF-8 sequence.
//
// A Tokenizer is safe for concurrent use by multiple goroutines. Decoder is
// not; use one per stream.
package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Tokenizer is a byte-level BPE tokenizer. Create one with Load or LoadDir.
type Tokenizer struct {
	path string // file the tokenizer was loaded from, for messages

	normalizer normalizer // nil when the file has none
	pre        []preTokenizer
	model      *bpe

	// added holds the added tokens matched on raw text (normalized=false)
	// and on normalized text (normalized=true).
	addedRaw, addedNorm *addedMatcher

	tokens  []string // id -> token as stored in the vocabulary ("" if unused)
	decoded []string // id -> bytes the id decodes to
	valid   []bool   // id -> whether the id exists
	special []bool   // id -> special (skipped by skipSpecial)
	byToken map[string]int32

	bos, eos     int32 // -1 when unknown
	addBOS       bool
	chatTemplate string

	cache   wordCache
	scratch sync.Pool // of *scratch
}

// Load reads a Hugging Face tokenizer.json file.
//
// BOS and EOS are taken from a TemplateProcessing post-processor when there
// is one; use LoadDir to also read tokenizer_config.json.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	t.path = path
	return t, nil
}

// LoadDir reads dir/tokenizer.json and, when present,
// dir/tokenizer_config.json and dir/chat_template.jinja.
//
// From tokenizer_config.json it takes bos_token and eos_token (a string or an
// AddedToken object), add_bos_token, the special flags of
// added_tokens_decoder, additional_special_tokens, pad_token and unk_token
// (all marked special so that Decode can skip them) and chat_template (a
// string, or a list of {name, template} of which "default" or else the first
// is used). A chat_template.jinja file takes precedence over chat_template.
func LoadDir(dir string) (*Tokenizer, error) {
	t, err := Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(cfgPath)
	switch {
	case err == nil:
		if err := t.applyConfig(data); err != nil {
			return nil, fmt.Errorf("tokenizer: %s: %w", cfgPath, err)
		}
	case !os.IsNotExist(err):
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	tmpl, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
	switch {
	case err == nil:
		t.chatTemplate = string(tmpl)
	case !os.IsNotExist(err):
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return t, nil
}

// Encode returns the token ids of text. It never adds BOS, EOS or other
// template tokens.
//
// Added tokens that are not special (for example Qwen's <think>) are always
// recognised in text. Special added tokens (for example <|im_start|>) are
// recognised only when allowSpecial is true; otherwise they are encoded as
// ordinary text, as Hugging Face does with encode_special_tokens, so that
// untrusted text cannot inject control tokens. Tokens that LoadDir marks
// special from tokenizer_config.json count as special here too.
//
// text should be valid UTF-8. Invalid bytes are kept: each is seen by the
// pre-tokenizer as U+FFFD but encoded as its own byte, so that Decode gives
// them back (as U+FFFD).
func (t *Tokenizer) Encode(text string, allowSpecial bool) []int32 {
	s, _ := t.scratch.Get().(*scratch)
	if s == nil {
		s = new(scratch)
	}
	defer t.scratch.Put(s)
	ids := make([]int32, 0, len(text)/3+1)
	t.addedRaw.split(text, allowSpecial, func(seg string, id int32) {
		if id >= 0 {
			ids = append(ids, id)
			return
		}
		if t.normalizer != nil {
			seg = t.normalizer.normalize(seg)
		}
		t.addedNorm.split(seg, allowSpecial, func(seg string, id int32) {
			if id >= 0 {
				ids = append(ids, id)
				return
			}
			ids = t.encodeText(s, seg, ids)
		})
	})
	return ids
}

// encodeText pre-tokenizes and BPE-encodes normalized text that contains no
// added tokens, appending to ids.
func (t *Tokenizer) encodeText(s *scratch, text string, ids []int32) []int32 {
	if text == "" {
		return ids
	}
	pieces := append(s.pieces[:0], text)
	for _, p := range t.pre {
		pieces = p.split(s, pieces)
	}
	s.pieces = pieces
	for _, w := range pieces {
		ids = t.encodeWord(w, ids)
	}
	return ids
}

// encodeWord appends the BPE encoding of one pre-token, using the cache.
func (t *Tokenizer) encodeWord(w string, ids []int32) []int32 {
	if len(w) == 1 {
		if id := t.model.byteID[w[0]]; id >= 0 {
			return append(ids, id)
		}
	}
	if cached, ok := t.cache.get(w); ok {
		return append(ids, cached...)
	}
	n := len(ids)
	ids = t.model.encode(w, ids)
	t.cache.put(w, ids[n:])
	return ids
}

// Decode returns the text of ids. Ids that are not in the vocabulary are
// ignored, and so are special tokens when skipSpecial is true. Invalid UTF-8
// produced by the byte-level tokens is replaced by U+FFFD (one per maximal
// invalid subsequence).
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	d := t.NewDecoder(skipSpecial)
	for _, id := range ids {
		d.appendID(id)
	}
	return string(d.take(true))
}

// TokenID returns the id of a token given as stored in the vocabulary
// (byte-level form, for example "Ġthe") or as an added token's content.
func (t *Tokenizer) TokenID(s string) (int32, bool) {
	id, ok := t.byToken[s]
	return id, ok
}

// Token returns the token of id as stored in the vocabulary (byte-level
// form) or the content of an added token.
func (t *Tokenizer) Token(id int32) (string, bool) {
	if id < 0 || int(id) >= len(t.valid) || !t.valid[id] {
		return "", false
	}
	return t.tokens[id], true
}

// TokenBytes returns the bytes id decodes to (an added token's content
// verbatim), which need not be valid UTF-8, and whether id exists.
func (t *Tokenizer) TokenBytes(id int32) (string, bool) {
	if id < 0 || int(id) >= len(t.valid) || !t.valid[id] {
		return "", false
	}
	return t.decoded[id], true
}

// VocabSize returns one more than the largest token id, added tokens
// included. It may be smaller than a model's embedding table, which is often
// padded.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// IsSpecial reports whether id is a special token: an added token marked
// special in tokenizer.json or tokenizer_config.json, or (with LoadDir) the
// BOS, EOS, pad or unk token or one of additional_special_tokens.
func (t *Tokenizer) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.special) && t.special[id]
}

// BOS returns the beginning-of-sequence token id, or -1 when unknown.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS returns the end-of-sequence token id, or -1 when unknown.
func (t *Tokenizer) EOS() int32 { return t.eos }

// AddBOS reports whether the tokenizer's configuration asks for BOS to be
// prepended to encoded sequences (add_bos_token in tokenizer_config.json, or
// a TemplateProcessing post-processor that starts with a special token).
// Encode never does it; callers that build raw prompts do.
func (t *Tokenizer) AddBOS() bool { return t.addBOS && t.bos >= 0 }

// ChatTemplate returns the Jinja chat template found by LoadDir, or "".
func (t *Tokenizer) ChatTemplate() string { return t.chatTemplate }

// applyConfig applies a tokenizer_config.json.
func (t *Tokenizer) applyConfig(data []byte) error {
	var cfg struct {
		AddBOS            *bool                      `json:"add_bos_token"`
		BOS               json.RawMessage            `json:"bos_token"`
		EOS               json.RawMessage            `json:"eos_token"`
		Pad               json.RawMessage            `json:"pad_token"`
		Unk               json.RawMessage            `json:"unk_token"`
		Additional        []json.RawMessage          `json:"additional_special_tokens"`
		AddedTokensDecode map[string]json.RawMessage `json:"added_tokens_decoder"`
		ChatTemplate      json.RawMessage            `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	// Special flags of added_tokens_decoder, in id order for determinism.
	keys := make([]string, 0, len(cfg.AddedTokensDecode))
	for k := range cfg.AddedTokensDecode {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var at struct {
			Content string `json:"content"`
			Special bool   `json:"special"`
		}
		if err := json.Unmarshal(cfg.AddedTokensDecode[k], &at); err != nil {
			return fmt.Errorf("added_tokens_decoder[%q]: %w", k, err)
		}
		id, ok := t.byToken[at.Content]
		if !ok {
			return fmt.Errorf("added_tokens_decoder[%q]: token %q is not in tokenizer.json", k, at.Content)
		}
		if at.Special {
			t.special[id] = true
		}
	}
	lookup := func(field string, raw json.RawMessage) (int32, bool, error) {
		s, ok, err := configToken(raw)
		if err != nil {
			return -1, false, fmt.Errorf("%s: %w", field, err)
		}
		if !ok {
			return -1, false, nil
		}
		id, found := t.byToken[s]
		if !found {
			return -1, false, fmt.Errorf("%s: token %q is not in the vocabulary", field, s)
		}
		return id, true, nil
	}
	markSpecial := func(field string, raw json.RawMessage) (int32, bool, error) {
		id, ok, err := lookup(field, raw)
		if ok {
			t.special[id] = true
		}
		return id, ok, err
	}
	if id, ok, err := markSpecial("bos_token", cfg.BOS); err != nil {
		return err
	} else if ok {
		t.bos = id
	}
	if id, ok, err := markSpecial("eos_token", cfg.EOS); err != nil {
		return err
	} else if ok {
		t.eos = id
	}
	if _, _, err := markSpecial("pad_token", cfg.Pad); err != nil {
		return err
	}
	if _, _, err := markSpecial("unk_token", cfg.Unk); err != nil {
		return err
	}
	for i, raw := range cfg.Additional {
		if _, _, err := markSpecial(fmt.Sprintf("additional_special_tokens[%d]", i), raw); err != nil {
			return err
		}
	}
	// Tokens made special here are also treated as special by Encode.
	for _, m := range []*addedMatcher{t.addedRaw, t.addedNorm} {
		for i := range m.tokens {
			m.tokens[i].special = t.special[m.tokens[i].id]
		}
	}
	if cfg.AddBOS != nil {
		t.addBOS = *cfg.AddBOS
	}
	if len(cfg.ChatTemplate) > 0 && string(cfg.ChatTemplate) != "null" {
		var s string
		if err := json.Unmarshal(cfg.ChatTemplate, &s); err == nil {
			t.chatTemplate = s
		} else {
			var named []struct {
				Name     string `json:"name"`
				Template string `json:"template"`
			}
			if err := json.Unmarshal(cfg.ChatTemplate, &named); err != nil {
				return fmt.Errorf("chat_template: want a string or a list of {name, template}: %w", err)
			}
			for i, n := range named {
				if i == 0 || n.Name == "default" {
					t.chatTemplate = n.Template
				}
				if n.Name == "default" {
					break
				}
			}
		}
	}
	return nil
}

// configToken decodes a tokenizer_config.json token field: null, a string or
// an AddedToken object with a "content" field.
func configToken(raw json.RawMessage) (string, bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", false, fmt.Errorf("want a string or an object with a content string, got %.40s", raw)
	}
	return *obj.Content, true, nil
}

// wordCacheMax bounds the number of pre-tokens cached per Tokenizer.
const wordCacheMax = 1 << 16

// wordCacheMaxLen is the longest pre-token (in bytes) that is cached.
const wordCacheMaxLen = 128

// wordCache maps pre-tokens to their BPE ids. When full it is emptied.
type wordCache struct {
	mu sync.RWMutex
	m  map[string][]int32
}

func (c *wordCache) get(w string) ([]int32, bool) {
	c.mu.RLock()
	ids, ok := c.m[w]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int32) {
	if len(w) > wordCacheMaxLen {
		return
	}
	v := make([]int32, len(ids))
	copy(v, ids)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= wordCacheMax {
		c.m = make(map[string][]int32, 1024)
	}
	c.m[strings.Clone(w)] = v
	c.mu.Unlock()
}

// scratch holds buffers reused during one Encode call.
type scratch struct {
	pieces []string
	next   []string
	runes  []rune
	offs   []int
	spans  []span
}
