// Command encode writes a text file's token ids, as strata's tokenizer makes
// them, as little-endian uint16: the beginning-of-sequence id, then the whole
// text encoded as one document. It is the stream `strata perplexity` scores,
// so the training code can score exactly the same tokens.
//
//	go run ./tools/train/encode -tokenizer models/strata-kjv heldout.txt heldout_eval.bin
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"

	"github.com/strata-inference/strata/tokenizer"
)

func main() {
	dir := flag.String("tokenizer", "models/strata-kjv", "folder with tokenizer.json")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: encode [-tokenizer DIR] IN.txt OUT.bin")
		os.Exit(2)
	}
	if err := run(*dir, flag.Arg(0), flag.Arg(1)); err != nil {
		fmt.Fprintln(os.Stderr, "encode:", err)
		os.Exit(1)
	}
}

func run(dir, in, out string) error {
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		return err
	}
	if tok.VocabSize() > 1<<16 {
		return fmt.Errorf("vocabulary of %d does not fit uint16", tok.VocabSize())
	}
	text, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	ids := append([]int32{tok.BOS()}, tok.Encode(string(text), false)...)
	buf := make([]byte, 2*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint16(buf[2*i:], uint16(id))
	}
	fmt.Fprintf(os.Stderr, "%s: %d bytes -> %d tokens\n", in, len(text), len(ids))
	return os.WriteFile(out, buf, 0o644)
}
