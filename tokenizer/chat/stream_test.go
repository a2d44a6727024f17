package chat

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// streamParse feeds completion to a StreamParser in the pieces cut gives and
// checks, after every Add, that what was emitted so far is a prefix of the
// final reply. It returns the reply and the concatenated deltas.
func streamParse(t testing.TB, completion string, thinking bool, pieces []string) (Parsed, string, string, error) {
	t.Helper()
	p := NewStreamParser(thinking)
	var reasoning, content strings.Builder
	final, ferr := ParseDeepSeekV4(completion, thinking)
	for _, piece := range pieces {
		r, c := p.Add(piece)
		if c != "" && !strings.HasPrefix(final.Reasoning, reasoning.String()+r) {
			t.Fatalf("reasoning emitted before content is incomplete: %q", reasoning.String())
		}
		reasoning.WriteString(r)
		content.WriteString(c)
		if !strings.HasPrefix(final.Reasoning, reasoning.String()) {
			t.Fatalf("after %q: reasoning %q is not a prefix of %q", piece, reasoning.String(), final.Reasoning)
		}
		if !strings.HasPrefix(final.Content, content.String()) {
			t.Fatalf("after %q: content %q is not a prefix of %q (error %v)", piece, content.String(), final.Content, ferr)
		}
	}
	r, c, res, err := p.Finish()
	reasoning.WriteString(r)
	content.WriteString(c)
	return res, reasoning.String(), content.String(), err
}

// checkStream compares streaming with the batch parser.
func checkStream(t testing.TB, completion string, thinking bool, pieces []string) {
	t.Helper()
	want, wantErr := ParseDeepSeekV4(completion, thinking)
	got, reasoning, content, err := streamParse(t, completion, thinking, pieces)
	if (err != nil) != (wantErr != nil) || (err != nil && !errors.Is(err, ErrMalformedToolCalls)) {
		t.Fatalf("%q in %q: stream error %v, batch error %v", completion, pieces, err, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q in %q:\nstream %#v\n batch %#v", completion, pieces, got, want)
	}
	if reasoning != want.Reasoning || content != want.Content {
		t.Fatalf("%q in %q: deltas add up to (%q, %q), want (%q, %q)", completion, pieces, reasoning, content, want.Reasoning, want.Content)
	}
}

func streamCorpus(t testing.TB) []struct {
	text     string
	thinking bool
} {
	_, _, golden := goldenCase(t, "1")
	const marker = tokAssistant + tokThinkStart
	first := strings.Index(golden, marker) + len(marker)
	last := strings.LastIndex(golden, marker) + len(marker)
	call := dsmlBlock(dsmlCall("f", dsmlP("a", "false", `[1, 2]`), dsmlP("b", "true", "x\n\ny")))
	return []struct {
		text     string
		thinking bool
	}{
		{golden[first:], true},
		{golden[last:], true},
		{"plain answer, é世😀" + tokEOS, false},
		{"reasoning with < and </thin but no end", true},
		{"r</think>c\n\n" + call + tokEOS + "after", true},
		{"r</think>c\n\n\n" + call, true},
		{"c\n\n" + call + "\n" + tokEOS, false},
		{"c\n<｜DSM not a marker <｜end of it\n\n<x", false},
		{"r" + tokEOS + "</think>c", true},
		{"c\n\n" + dsmlToolCalls + "\n" + dsmlCall("f") + "\ntrailing", false},
		{"c<｜DSML｜bogus>" + tokEOS, false},
		{"世界</think>\n\n" + call, true},
		{"reasoning, then a call without </think>\n\n" + call + tokEOS, true},
		{"r\n\n\n" + call + "</think>after", true},
		{"r <｜DSML｜tool_call not quite\n\n" + dsmlToolCalls + "\n" + dsmlCall("f"), true},
	}
}

// TestStreamParserEverySplit feeds each completion in two pieces, split at
// every byte, and byte by byte.
func TestStreamParserEverySplit(t *testing.T) {
	for _, c := range streamCorpus(t) {
		for k := 0; k <= len(c.text); k++ {
			checkStream(t, c.text, c.thinking, []string{c.text[:k], c.text[k:]})
		}
		var bytes []string
		for i := range len(c.text) {
			bytes = append(bytes, c.text[i:i+1])
		}
		checkStream(t, c.text, c.thinking, bytes)
	}
}

// TestStreamParserHoldsBack checks that nothing that might be a marker, and
// no partial UTF-8 sequence, is emitted before it is decided.
func TestStreamParserHoldsBack(t *testing.T) {
	p := NewStreamParser(true)
	for _, piece := range []string{"abc</th", "ink>Hi\n", "\n<｜DS", "ML｜tool_calls>"} {
		r, c := p.Add(piece)
		for _, d := range []string{r, c} {
			for _, m := range []string{"<", "\n", "</th", "<｜"} {
				if strings.HasSuffix(d, m) {
					t.Errorf("delta %q ends with %q", d, m)
				}
			}
		}
	}
	p = NewStreamParser(false)
	s := "é世😀"
	var got strings.Builder
	for i := range len(s) {
		_, c := p.Add(s[i : i+1])
		if !utf8.ValidString(c) {
			t.Errorf("delta %q splits a UTF-8 sequence", c)
		}
		got.WriteString(c)
	}
	_, c, _, _ := p.Finish()
	if got.String()+c != s {
		t.Errorf("got %q, want %q", got.String()+c, s)
	}
}

func TestStreamParserFinishTwice(t *testing.T) {
	p := NewStreamParser(false)
	if _, c := p.Add("hello\n"); c != "hello" {
		t.Errorf("Add returned %q, want \"hello\" (the newline held back)", c)
	}
	_, c1, r1, err1 := p.Finish()
	_, c2, r2, err2 := p.Finish()
	if c1 != "\n" || r1.Content != "hello\n" || c2 != "" || !reflect.DeepEqual(r1, r2) || err1 != nil || err2 != nil {
		t.Errorf("first (%q, %+v, %v), second (%q, %+v, %v)", c1, r1, err1, c2, r2, err2)
	}
	if r, c := p.Add("more"); r != "" || c != "" {
		t.Errorf("Add after Finish returned (%q, %q)", r, c)
	}
}

// FuzzParseDeepSeekV4 checks that parsing never panics and that streaming,
// in pieces chosen by the fuzzer, agrees with the batch parser.
func FuzzParseDeepSeekV4(f *testing.F) {
	for _, c := range streamCorpus(f) {
		f.Add(c.text, c.thinking, []byte{3, 1, 7, 0, 20})
	}
	f.Add("a</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"x\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>", true, []byte{1})
	f.Fuzz(func(t *testing.T, text string, thinking bool, cuts []byte) {
		var pieces []string
		rest := text
		for i := 0; rest != ""; i++ {
			n := len(rest)
			if len(cuts) > 0 {
				n = min(int(cuts[i%len(cuts)])+1, n)
			}
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		checkStream(t, text, thinking, pieces)
	})
}
