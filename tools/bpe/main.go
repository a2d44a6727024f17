// Command bpe trains the byte-level BPE tokenizer of strata-kjv on a corpus
// made by tools/corpus/build.sh, writes it as tokenizer.json and
// tokenizer_config.json, and encodes the corpus with strata's tokenizer
// package into the token files the model is trained on.
//
// Usage:
//
//	go run ./tools/bpe -corpus /tmp/strata-corpus -out models/strata-kjv -vocab 6144
//
// It reads CORPUS/train.txt and CORPUS/heldout.txt and writes
// OUT/tokenizer.json, OUT/tokenizer_config.json, and for NAME in train and
// heldout, CORPUS/NAME.bin (the token ids) and CORPUS/NAME.docs.tsv (where
// each document lies in NAME.bin). See tools/bpe/README.md for the layout.
// Progress goes to stderr; the outputs are the same on every run.
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/strata-inference/strata/tokenizer"
	"github.com/strata-inference/strata/tools/bpe/bpe"
)

// DeepSeek-V4's beginning- and end-of-sentence tokens.
const (
	bosToken = "<｜begin▁of▁sentence｜>"
	eosToken = "<｜end▁of▁sentence｜>"
	padToken = "<｜▁pad▁｜>"
)

// addedTokens returns the added tokens, at ids 0 onwards: DeepSeek-V4's
// bos (0), eos (1) and pad (2), as in DeepSeek-V3's tokenizer, then the
// tokens that DeepSeek-V4's chat encoding (tokenizer/chat) writes as single
// tokens: the turn markers, the thinking delimiters, the latest-reminder
// marker and the quick-instruction task tokens. As in DeepSeek's
// tokenizers, only bos, eos and pad are special; the chat markers are
// ordinary added tokens, recognised wherever they appear in text and kept
// when decoding. The DSML tool-call markup ("<｜DSML｜invoke ...>") is plain
// text.
func addedTokens() []bpe.AddedToken {
	toks := []bpe.AddedToken{
		{Content: bosToken, Special: true},
		{Content: eosToken, Special: true},
		{Content: padToken, Special: true},
	}
	for _, s := range []string{
		"<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "<｜latest_reminder｜>",
		"<｜action｜>", "<｜query｜>", "<｜authority｜>", "<｜domain｜>", "<｜title｜>", "<｜read_url｜>",
	} {
		toks = append(toks, bpe.AddedToken{Content: s})
	}
	return toks
}

// modelMaxLength is tokenizer_config.json's model_max_length: DeepSeek-V4's
// max_position_embeddings.
const modelMaxLength = 1 << 20

func main() {
	corpus := flag.String("corpus", "/tmp/strata-corpus", "directory with train.txt and heldout.txt; the .bin files are written here")
	out := flag.String("out", "models/strata-kjv", "directory for tokenizer.json and tokenizer_config.json")
	vocab := flag.Int("vocab", 6144, "vocabulary size, added tokens included (at most 65536, for uint16 ids)")
	workers := flag.Int("workers", runtime.GOMAXPROCS(0), "goroutines for pre-tokenizing and encoding")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: bpe [-corpus DIR] [-out DIR] [-vocab N] [-workers N]")
		os.Exit(2)
	}
	if err := run(*corpus, *out, *vocab, max(*workers, 1), os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bpe:", err)
		os.Exit(1)
	}
}

// run does the work of the command, writing progress to logw.
func run(corpus, out string, vocab, workers int, logw io.Writer) error {
	logf := func(format string, args ...any) {
		fmt.Fprintf(logw, "bpe: "+format+"\n", args...)
	}
	start := time.Now()
	added := addedTokens()
	if vocab > 1<<16 || vocab < len(added)+256 {
		return fmt.Errorf("-vocab %d: want %d to 65536", vocab, len(added)+256)
	}
	train, err := readDocs(filepath.Join(corpus, "train.txt"))
	if err != nil {
		return err
	}
	held, err := readDocs(filepath.Join(corpus, "heldout.txt"))
	if err != nil {
		return err
	}

	logf("pre-tokenizing %d documents of train.txt", len(train))
	counts, err := countPreTokens(train, workers)
	if err != nil {
		return err
	}
	logf("%d distinct pre-tokens (%.1fs)", len(counts), time.Since(start).Seconds())

	target := vocab - len(added)
	merges, err := bpe.Train(counts, bpe.Options{
		Tokens: target,
		Progress: func(n int) {
			fmt.Fprintf(logw, "\rbpe: training: %d/%d tokens", n, target)
		},
	})
	fmt.Fprintln(logw)
	if err != nil {
		return err
	}
	m, err := bpe.NewModel(added, merges)
	if err != nil {
		return err
	}
	if m.VocabSize() != vocab {
		return fmt.Errorf("the corpus gave only %d tokens of %d (too few pairs occur twice)", m.VocabSize(), vocab)
	}
	logf("%d merges, %d tokens (%.1fs)", len(merges), m.VocabSize(), time.Since(start).Seconds())

	tj, err := m.TokenizerJSON(bosToken)
	if err != nil {
		return err
	}
	cj, err := m.ConfigJSON(bpe.Config{BOS: bosToken, EOS: eosToken, Pad: padToken, ModelMaxLength: modelMaxLength})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(out, "tokenizer.json"), tj); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(out, "tokenizer_config.json"), cj); err != nil {
		return err
	}

	tok, err := tokenizer.LoadDir(out)
	if err != nil {
		return err
	}
	if tok.VocabSize() != vocab || tok.BOS() != 0 || tok.EOS() != 1 || !tok.AddBOS() {
		return fmt.Errorf("%s: strata loads vocab %d, bos %d, eos %d, add_bos %t; want %d, 0, 1, true",
			out, tok.VocabSize(), tok.BOS(), tok.EOS(), tok.AddBOS(), vocab)
	}
	for _, f := range []struct {
		name string
		docs []string
	}{{"heldout", held}, {"train", train}} {
		st, err := encodeDocs(tok, m, f.docs, workers)
		if err != nil {
			return fmt.Errorf("%s.txt: %w", f.name, err)
		}
		if err := writeBin(filepath.Join(corpus, f.name), f.docs, st.ids); err != nil {
			return err
		}
		logf("%s: %d documents, %d bytes -> %d tokens with bos/eos (%d of text): %.3f bytes/token; round trip and reference encoder agree",
			f.name, len(f.docs), st.bytes, st.total, st.text, float64(st.bytes)/float64(st.text))
	}
	logf("done in %.1fs", time.Since(start).Seconds())
	return nil
}

// readDocs reads a corpus file: documents separated by one empty line,
// with a final newline. It returns the documents without their final
// newline.
func readDocs(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	text := string(data)
	if !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("%s: does not end with a newline", path)
	}
	docs := strings.Split(strings.TrimSuffix(text, "\n"), "\n\n")
	for i, d := range docs {
		if d == "" || strings.HasPrefix(d, "\n") || strings.HasSuffix(d, "\n") {
			return nil, fmt.Errorf("%s: document %d is empty or has an extra empty line", path, i+1)
		}
	}
	return docs, nil
}

// parallel calls fn(worker, i) for i in [0, n) on the given number of
// goroutines and returns the first error.
func parallel(n, workers int, fn func(worker, i int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, workers)
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if errs[w] == nil {
					errs[w] = fn(w, i)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// countPreTokens counts the pre-tokens of every document.
func countPreTokens(docs []string, workers int) (map[string]int64, error) {
	pts := make([]*bpe.PreTokenizer, workers)
	local := make([]map[string]int64, workers)
	for w := range pts {
		p, err := bpe.NewPreTokenizer(bpe.Patterns())
		if err != nil {
			return nil, err
		}
		pts[w], local[w] = p, make(map[string]int64)
	}
	err := parallel(len(docs), workers, func(w, i int) error {
		for _, piece := range pts[w].Split(docs[i]) {
			local[w][piece]++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	counts := local[0]
	for _, l := range local[1:] {
		for k, c := range l {
			counts[k] += c
		}
	}
	return counts, nil
}

// encodeStats are the results of encodeDocs.
type encodeStats struct {
	ids   [][]int32 // per document, without bos and eos
	bytes int       // text bytes of all documents
	text  int       // tokens of text
	total int       // tokens with each document's bos and eos
}

// encodeDocs encodes each document with strata's tokenizer. It checks that
// no document's tokens include bos or eos, that decoding gives the
// document back, and that the reference encoder (the trainer's
// pre-tokenizer and merges) gives the same ids.
func encodeDocs(tok *tokenizer.Tokenizer, m *bpe.Model, docs []string, workers int) (encodeStats, error) {
	st := encodeStats{ids: make([][]int32, len(docs))}
	pts := make([]*bpe.PreTokenizer, workers)
	for w := range pts {
		p, err := bpe.NewPreTokenizer(bpe.Patterns())
		if err != nil {
			return st, err
		}
		pts[w] = p
	}
	err := parallel(len(docs), workers, func(w, i int) error {
		d := docs[i]
		ids := tok.Encode(d, false)
		st.ids[i] = ids
		if slices.Contains(ids, 0) || slices.Contains(ids, 1) {
			return fmt.Errorf("document %d encodes to bos or eos", i+1)
		}
		if got := tok.Decode(ids, false); got != d {
			return fmt.Errorf("document %d does not survive Decode(Encode(text))", i+1)
		}
		var ref []int32
		for _, p := range pts[w].Split(d) {
			ref = m.Encode(p, ref)
		}
		if !slices.Equal(ref, ids) {
			return fmt.Errorf("document %d: strata's encoding differs from the trainer's reference encoding", i+1)
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	for i, d := range docs {
		st.bytes += len(d)
		st.text += len(st.ids[i])
		st.total += len(st.ids[i]) + 2
	}
	return st, nil
}

// writeBin writes base.bin, each document as bos, its tokens, eos, in
// little-endian uint16s, and base.docs.tsv: a header line, then one line
// per document with the offset of its bos in tokens, its length in tokens
// (bos and eos included), its length in bytes and its first line.
func writeBin(base string, docs []string, ids [][]int32) error {
	var bin []byte
	var tsv bytes.Buffer
	tsv.WriteString("offset\ttokens\tbytes\tfirst_line\n")
	for i, d := range docs {
		first, _, _ := strings.Cut(d, "\n")
		fmt.Fprintf(&tsv, "%d\t%d\t%d\t%s\n", len(bin)/2, len(ids[i])+2, len(d), first)
		bin = binary.LittleEndian.AppendUint16(bin, 0)
		for _, id := range ids[i] {
			bin = binary.LittleEndian.AppendUint16(bin, uint16(id))
		}
		bin = binary.LittleEndian.AppendUint16(bin, 1)
	}
	if err := writeFile(base+".bin", bin); err != nil {
		return err
	}
	return writeFile(base+".docs.tsv", tsv.Bytes())
}

// writeFile writes data to path through a temporary file, so that an
// interrupted run leaves the old file or none.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
