package tokenizer

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzEncodeDecode checks, for valid UTF-8 text, that Decode(Encode(s)) is
// s (its NFC form for tokenizers that normalize), and, for any id sequence
// (read from ids as little-endian uint32s), that the streaming Decoder's
// outputs are valid UTF-8 and concatenate to Decode. It uses the tiny test
// tokenizer and, when STRATA_FIXTURES is set, the Qwen3 and DeepSeek-V3
// ones.
func FuzzEncodeDecode(f *testing.F) {
	for _, s := range []string{
		"", "hello world", "  \n\t x", "你好😀", "e\u0301", "it's 123456",
		"<|endoftext|><|im_start|><｜User｜><think>", "\xff\xfe", strings.Repeat("ab ", 40),
	} {
		f.Add(s, []byte{0xE4, 0, 0, 0, 0xBD, 0, 0, 0, 0xA0, 0, 0, 0, 7, 1, 0, 0})
	}
	toks := []*Tokenizer{loadTiny(f)}
	if os.Getenv(fixturesEnv) != "" {
		for _, rt := range realTokenizers {
			toks = append(toks, realTokenizer(f, rt.pkg))
		}
	}
	f.Fuzz(func(t *testing.T, s string, raw []byte) {
		var ids []int32
		for len(raw) >= 4 {
			ids = append(ids, int32(binary.LittleEndian.Uint32(raw)%200000))
			raw = raw[4:]
		}
		for _, tok := range toks {
			if utf8.ValidString(s) {
				want := s
				if tok.normalizer != nil {
					want = tok.normalizer.normalize(s)
				}
				for _, allow := range []bool{false, true} {
					enc := tok.Encode(s, allow)
					if got := tok.Decode(enc, false); got != want {
						t.Fatalf("Decode(Encode(%q, %v)) = %q", s, allow, got)
					}
				}
			}
			for _, skip := range []bool{false, true} {
				d := tok.NewDecoder(skip)
				var b strings.Builder
				for _, id := range ids {
					out := d.Add(id)
					if !utf8.ValidString(out) {
						t.Fatalf("Add(%d) = %q", id, out)
					}
					b.WriteString(out)
				}
				b.WriteString(d.Flush())
				if whole := tok.Decode(ids, skip); b.String() != whole {
					t.Fatalf("ids %v: streamed %q, Decode %q", ids, b.String(), whole)
				}
			}
		}
	})
}
