package bpe_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-inference/strata/tokenizer"
	"github.com/strata-inference/strata/tools/bpe/bpe"
)

const sample = `Genesis 1
In the beginning God created the heaven and the earth.
And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters.
And God said, Let there be light: and there was light.
And God saw the light, that it was good: and God divided the light from the darkness.
And God called the light Day, and the darkness he called Night. And the evening and the morning were the first day.

Psalm 23
The LORD is my shepherd; I shall not want.
He maketh me to lie down in green pastures: he leadeth me beside the still waters.
He restoreth my soul: he leadeth me in the paths of righteousness for his name's sake.`

// train trains a small tokenizer on sample and writes it to a temporary
// directory, returning the directory and the model.
func train(t *testing.T, added []bpe.AddedToken, tokens int) (string, *bpe.Model) {
	t.Helper()
	p, err := bpe.NewPreTokenizer(bpe.Patterns())
	if err != nil {
		t.Fatal(err)
	}
	counts := make(map[string]int64)
	for _, doc := range strings.Split(sample, "\n\n") {
		for _, w := range p.Split(doc) {
			counts[w]++
		}
	}
	merges, err := bpe.Train(counts, bpe.Options{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	m, err := bpe.NewModel(added, merges)
	if err != nil {
		t.Fatal(err)
	}
	tj, err := m.TokenizerJSON(added[0].Content)
	if err != nil {
		t.Fatal(err)
	}
	cj, err := m.ConfigJSON(bpe.Config{BOS: added[0].Content, EOS: added[1].Content, Pad: added[2].Content, ModelMaxLength: 4096})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cj, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

func TestStrataLoadsAndRoundTrips(t *testing.T) {
	added := []bpe.AddedToken{
		{Content: "<｜begin▁of▁sentence｜>", Special: true},
		{Content: "<｜end▁of▁sentence｜>", Special: true},
		{Content: "<｜▁pad▁｜>", Special: true},
		{Content: "<｜User｜>"},
		{Content: "<think>"},
	}
	dir, m := train(t, added, 300)
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != m.VocabSize() || tok.VocabSize() <= len(added)+256 {
		t.Fatalf("strata vocab %d, model %d", tok.VocabSize(), m.VocabSize())
	}
	if tok.BOS() != 0 || tok.EOS() != 1 || !tok.AddBOS() {
		t.Errorf("bos %d eos %d add_bos %t", tok.BOS(), tok.EOS(), tok.AddBOS())
	}
	for i, a := range added {
		id, ok := tok.TokenID(a.Content)
		if !ok || id != int32(i) || tok.IsSpecial(id) != a.Special {
			t.Errorf("%q: id %d %t special %t", a.Content, id, ok, tok.IsSpecial(id))
		}
	}
	// Bytes come next, in GPT-2's order.
	if id, _ := tok.TokenID("!"); id != int32(len(added)) {
		t.Errorf("'!' has id %d, want %d", id, len(added))
	}

	p, err := bpe.NewPreTokenizer(bpe.Patterns())
	if err != nil {
		t.Fatal(err)
	}
	texts := append(strings.Split(sample, "\n\n"),
		"Unseen words: zebra, quixotic, 1234567 and ünïcödé — “quotes” 日本語 🙂\r\n\ttabs",
		"  leading spaces and trailing  ",
		"")
	for _, text := range texts {
		ids := tok.Encode(text, false)
		if got := tok.Decode(ids, false); got != text {
			t.Errorf("Decode(Encode(%q)) = %q", text, got)
		}
		var ref []int32
		for _, w := range p.Split(text) {
			ref = m.Encode(w, ref)
		}
		if !slices.Equal(ids, ref) {
			t.Errorf("%q: strata %v, reference %v", text, ids, ref)
		}
	}

	// Special tokens are recognised only when allowed; chat markers always.
	ids := tok.Encode("<｜begin▁of▁sentence｜><｜User｜>Hi<think>", false)
	if ids[0] == 0 || !slices.Contains(ids, 3) || !slices.Contains(ids, 4) {
		t.Errorf("allowSpecial=false: %v", ids)
	}
	ids = tok.Encode("<｜begin▁of▁sentence｜><｜User｜>Hi", true)
	if ids[0] != 0 || ids[1] != 3 {
		t.Errorf("allowSpecial=true: %v", ids)
	}
	if got := tok.Decode([]int32{0, 3, 1}, true); got != "<｜User｜>" {
		t.Errorf("Decode skipping special = %q", got)
	}
}

func TestTokenizerJSONDeterministic(t *testing.T) {
	added := []bpe.AddedToken{{Content: "<s>", Special: true}, {Content: "</s>", Special: true}, {Content: "<pad>", Special: true}}
	dir1, _ := train(t, added, 320)
	dir2, _ := train(t, added, 320)
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		a, _ := os.ReadFile(filepath.Join(dir1, name))
		b, _ := os.ReadFile(filepath.Join(dir2, name))
		if len(a) == 0 || string(a) != string(b) {
			t.Errorf("%s differs between two runs", name)
		}
	}
}
