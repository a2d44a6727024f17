package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// addedToken is an entry of tokenizer.json's added_tokens.
type addedToken struct {
	id                         int32
	content                    string // matched text (normalized if the token is)
	special                    bool
	singleWord, lstrip, rstrip bool
}

// addedMatcher finds added tokens in text, leftmost-longest first, with a
// byte trie.
type addedMatcher struct {
	tokens []addedToken
	first  [256]bool  // bytes that start some token
	nodes  []trieNode // nodes[0] is the root
}

type trieNode struct {
	next  map[byte]int32
	token int32 // index into tokens, -1 if no token ends here
}

func newAddedMatcher(tokens []addedToken) *addedMatcher {
	m := &addedMatcher{tokens: tokens, nodes: []trieNode{{token: -1}}}
	for i, t := range tokens {
		n := int32(0)
		for j := 0; j < len(t.content); j++ {
			c := t.content[j]
			nx, ok := m.nodes[n].next[c]
			if !ok {
				if m.nodes[n].next == nil {
					m.nodes[n].next = make(map[byte]int32)
				}
				nx = int32(len(m.nodes))
				m.nodes[n].next[c] = nx
				m.nodes = append(m.nodes, trieNode{token: -1})
			}
			n = nx
		}
		if m.nodes[n].token < 0 { // the first of duplicate contents wins
			m.nodes[n].token = int32(i)
		}
		if t.content != "" {
			m.first[t.content[0]] = true
		}
	}
	return m
}

// longestAt returns the index of the longest token starting at text[i:], or
// -1.
func (m *addedMatcher) longestAt(text string, i int) int32 {
	best := int32(-1)
	n := int32(0)
	for j := i; j < len(text); j++ {
		nx, ok := m.nodes[n].next[text[j]]
		if !ok {
			break
		}
		n = nx
		if t := m.nodes[n].token; t >= 0 {
			best = t
		}
	}
	return best
}

// split calls f for each piece of text in order: either text between added
// tokens (id -1, possibly never called for empty text) or an added token
// (with its id). It follows Hugging Face's AddedVocabulary::find_matches:
// matches are leftmost-longest and non-overlapping; a special token is
// skipped when allowSpecial is false and a single_word token when it touches
// a word character; lstrip and rstrip extend a match over adjacent
// whitespace.
func (m *addedMatcher) split(text string, allowSpecial bool, f func(seg string, id int32)) {
	if len(m.tokens) == 0 {
		f(text, -1)
		return
	}
	done := 0 // text[:done] has been passed to f
	for i := 0; i < len(text); {
		if !m.first[text[i]] {
			i++
			continue
		}
		ti := m.longestAt(text, i)
		if ti < 0 {
			i++
			continue
		}
		t := &m.tokens[ti]
		start, stop := i, i+len(t.content)
		i = stop // matches do not overlap, even when skipped below
		if t.special && !allowSpecial {
			continue
		}
		if t.singleWord && (endsWithWord(text[:start]) || startsWithWord(text[stop:])) {
			continue
		}
		if t.lstrip {
			start = max(done, len(trimRightSpace(text[:start])))
		}
		if t.rstrip {
			stop = len(text) - len(trimLeftSpace(text[stop:]))
			i = stop
		}
		if start > done {
			f(text[done:start], -1)
		}
		f(text[start:stop], t.id)
		done = stop
	}
	if done < len(text) || done == 0 {
		f(text[done:], -1)
	}
}

func isWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) }

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWordRune(r)
}

func trimRightSpace(s string) string {
	for len(s) > 0 {
		r, n := utf8.DecodeLastRuneInString(s)
		if !unicode.IsSpace(r) {
			break
		}
		s = s[:len(s)-n]
	}
	return s
}

func trimLeftSpace(s string) string {
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if !unicode.IsSpace(r) {
			break
		}
		s = s[n:]
	}
	return s
}
