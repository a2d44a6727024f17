package main

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-inference/strata/tokenizer"
)

const trainText = `The First Book of Moses, Called Genesis
Genesis 1
In the beginning God created the heaven and the earth.
And the earth was without form, and void; and darkness was upon the face of the deep.
And God said, Let there be light: and there was light.

Genesis 2
Thus the heavens and the earth were finished, and all the host of them.
And on the seventh day God ended his work which he had made.

Psalm 23
The LORD is my shepherd; I shall not want.
He maketh me to lie down in green pastures: he leadeth me beside the still waters.
`

const heldText = `The Book of Ruth
Ruth 1
Now it came to pass in the days when the judges ruled, that there was a famine in the land.
`

// TestRun runs the whole command on a tiny corpus twice and checks the
// layout of the token files and that both runs give the same bytes.
func TestRun(t *testing.T) {
	var first map[string][]byte
	for i := 0; i < 2; i++ {
		corpus, out := t.TempDir(), t.TempDir()
		if err := os.WriteFile(filepath.Join(corpus, "train.txt"), []byte(trainText), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(corpus, "heldout.txt"), []byte(heldText), 0o644); err != nil {
			t.Fatal(err)
		}
		const vocab = 320
		if err := run(corpus, out, vocab, 2, io.Discard); err != nil {
			t.Fatal(err)
		}
		tok, err := tokenizer.LoadDir(out)
		if err != nil {
			t.Fatal(err)
		}
		if tok.VocabSize() != vocab {
			t.Errorf("vocab %d, want %d", tok.VocabSize(), vocab)
		}
		files := make(map[string][]byte)
		for _, p := range []string{
			filepath.Join(out, "tokenizer.json"), filepath.Join(out, "tokenizer_config.json"),
			filepath.Join(corpus, "train.bin"), filepath.Join(corpus, "train.docs.tsv"),
			filepath.Join(corpus, "heldout.bin"), filepath.Join(corpus, "heldout.docs.tsv"),
		} {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			files[filepath.Base(p)] = data
		}
		if first == nil {
			first = files
		} else {
			for name, data := range files {
				if string(data) != string(first[name]) {
					t.Errorf("%s differs between runs", name)
				}
			}
		}

		// train.bin is bos, document, eos for each document in order.
		bin := files["train.bin"]
		got := make([]int32, len(bin)/2)
		for i := range got {
			got[i] = int32(binary.LittleEndian.Uint16(bin[2*i:]))
		}
		var want []int32
		docs := strings.Split(strings.TrimSuffix(trainText, "\n"), "\n\n")
		var tsv strings.Builder
		tsv.WriteString("offset\ttokens\tbytes\tfirst_line\n")
		for _, d := range docs {
			ids := tok.Encode(d, false)
			first, _, _ := strings.Cut(d, "\n")
			tsv.WriteString(strings.Join([]string{strconv.Itoa(len(want)), strconv.Itoa(len(ids) + 2), strconv.Itoa(len(d)), first}, "\t") + "\n")
			want = append(want, 0)
			want = append(want, ids...)
			want = append(want, 1)
		}
		if !slices.Equal(got, want) {
			t.Errorf("train.bin:\n got %v\nwant %v", got, want)
		}
		if string(files["train.docs.tsv"]) != tsv.String() {
			t.Errorf("train.docs.tsv:\n%s\nwant\n%s", files["train.docs.tsv"], tsv.String())
		}
	}
}

func TestReadDocsErrors(t *testing.T) {
	dir := t.TempDir()
	for _, text := range []string{"no final newline", "a\n\n\nb\n", "\n"} {
		p := filepath.Join(dir, "x.txt")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readDocs(p); err == nil {
			t.Errorf("readDocs accepted %q", text)
		}
	}
}

// TestCommittedTokenizer loads models/strata-kjv with strata's tokenizer
// and checks its special tokens and round trips. With the corpus at hand
// ($STRATA_CORPUS, else /tmp/strata-corpus, as tools/corpus/build.sh makes
// it), it also round-trips the whole held-out text and reports its bytes
// per token.
func TestCommittedTokenizer(t *testing.T) {
	tok, err := tokenizer.LoadDir("../../models/strata-kjv")
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 6144 || tok.BOS() != 0 || tok.EOS() != 1 || !tok.AddBOS() {
		t.Errorf("vocab %d bos %d eos %d add_bos %t", tok.VocabSize(), tok.BOS(), tok.EOS(), tok.AddBOS())
	}
	for i, a := range addedTokens() {
		id, ok := tok.TokenID(a.Content)
		if !ok || id != int32(i) || tok.IsSpecial(id) != a.Special {
			t.Errorf("%q: id %d (%t), special %t", a.Content, id, ok, tok.IsSpecial(id))
		}
	}
	for _, text := range []string{
		"Psalm 23\nThe LORD is my shepherd; I shall not want.",
		"Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich — 日本語 🙂\r\n",
		"<｜User｜>Hello<｜Assistant｜><think>\n\n</think>Hi<｜end▁of▁sentence｜>",
	} {
		if got := tok.Decode(tok.Encode(text, true), false); got != text {
			t.Errorf("round trip of %q gave %q", text, got)
		}
	}
	if ids := tok.Encode("<｜User｜>Hi<｜Assistant｜></think>", false); ids[0] != 3 || len(ids) < 4 || ids[len(ids)-2] != 4 || ids[len(ids)-1] != 6 {
		t.Errorf("chat markers encode to %v", ids)
	}

	dir := os.Getenv("STRATA_CORPUS")
	if dir == "" {
		dir = "/tmp/strata-corpus"
	}
	data, err := os.ReadFile(filepath.Join(dir, "heldout.txt"))
	if err != nil {
		t.Logf("no held-out text (%v); run tools/corpus/build.sh to check it too", err)
		return
	}
	docs := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n\n")
	var n, bytes int
	for _, d := range docs {
		ids := tok.Encode(d, false)
		if got := tok.Decode(ids, false); got != d {
			t.Fatalf("held-out document %q does not round-trip", strings.SplitN(d, "\n", 2)[0])
		}
		n += len(ids)
		bytes += len(d)
	}
	t.Logf("held-out: %d documents, %d bytes, %d tokens: %.3f bytes/token", len(docs), bytes, n, float64(bytes)/float64(n))
}
