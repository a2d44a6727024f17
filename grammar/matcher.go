package grammar

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Matcher follows one generation through a grammar: which tokens may come
// next (Allowed), the token that came (Accept), and whether the text so far
// is complete. Its state is a set of pushdown configurations whose stacks
// are interned in the matcher's arena, so that equal states compare equal
// and their masks are computed once. After Accept, the node masks the new
// state needs that are not computed yet are computed in the background,
// overlapping the model's next step. It satisfies the engine's
// Constraint. A Matcher is not safe for concurrent use; make one per
// generation.
type Matcher struct {
	x        *Index
	arena    []frame
	interned map[frame]int32
	cur      []frame // configurations; parents index arena (-1: bottom)
	complete bool
	cache    map[string][]uint64
	key      []byte
	s        sim
	a, b     []frame
	// warming is closed when the node masks of the state Accept reached,
	// computed in the background (overlapping the model's next forward
	// pass), are ready; nil when none are being computed.
	warming chan struct{}
}

// maxCachedMasks bounds a matcher's cache of whole masks (each the
// vocabulary's size in bits).
const maxCachedMasks = 64

func newMatcher(x *Index) *Matcher {
	m := &Matcher{x: x, interned: map[frame]int32{}, cache: map[string][]uint64{}}
	m.s = sim{g: x.g}
	set, bottom := m.s.closure([]frame{{x.g.root, -1}})
	m.cur, m.complete = slices.Clone(set), bottom
	return m
}

// Words is the length of the masks Allowed fills: one bit per token id.
func (m *Matcher) Words() int { return (m.x.v.Size() + 63) / 64 }

// Complete reports whether the text so far is a whole string of the
// grammar, so that generation may end here. Tokens may still be allowed
// (a number can always take another digit).
func (m *Matcher) Complete() bool { return m.complete }

// Allowed sets mask to the tokens that may come next: bit t%64 of word t/64
// for token t. Words beyond the vocabulary are cleared. The end of text
// (EOS) is not a token here: it is allowed when Complete.
func (m *Matcher) Allowed(mask []uint64) {
	m.settle()
	if len(mask) < m.Words() {
		panic(fmt.Sprintf("grammar: a mask of %d words for a vocabulary of %d tokens", len(mask), m.x.v.Size()))
	}
	if len(m.cur) == 1 && m.cur[0].parent == -1 {
		// Nothing below: the node's own mask is the answer (what would
		// leave its rule finds nothing to continue with).
		m.x.node(m.cur[0].node).copyInto(mask)
		return
	}
	clear(mask)
	m.key = m.key[:0]
	for _, c := range m.cur {
		m.key = binary.LittleEndian.AppendUint32(m.key, uint32(c.node))
		m.key = binary.LittleEndian.AppendUint32(m.key, uint32(c.parent))
	}
	if got, ok := m.cache[string(m.key)]; ok {
		copy(mask, got)
		return
	}
	v := m.x.v
	checked := 0
	for _, c := range m.cur {
		nm := m.x.node(c.node)
		nm.orInto(mask)
		if c.parent == -1 {
			continue
		}
		for _, t := range nm.uncertain {
			if mask[t>>6]&(1<<(t&63)) == 0 {
				checked++
				if m.viable(c, v.tokens[t]) {
					mask[t>>6] |= 1 << (t & 63)
				}
			}
		}
	}
	if checked < 64 {
		return // cheaper to redo than to keep
	}
	if len(m.cache) >= maxCachedMasks {
		clear(m.cache)
	}
	m.cache[string(m.key)] = slices.Clone(mask[:min(len(mask), m.Words())])
}

// viable reports whether text can be read from configuration c.
func (m *Matcher) viable(c frame, text string) bool {
	s := sim{g: m.x.g, base: m.arena, local: m.s.local[:0]}
	a := append(m.a[:0], c)
	b := m.b[:0]
	ok := true
	for i := range len(text) {
		b = b[:0]
		for _, c := range a {
			b = s.step(c, text[i], b)
		}
		b, _ = s.closure(b)
		if len(b) == 0 {
			ok = false
			break
		}
		a, b = b, a
	}
	m.a, m.b, m.s.local = a, b, s.local
	return ok
}

// Accept advances past token tok. It fails, changing nothing, when the
// grammar does not allow tok here.
func (m *Matcher) Accept(tok int32) error {
	m.settle()
	text := m.x.v.Token(tok)
	if text == "" {
		return fmt.Errorf("grammar: token %d has no text a grammar can match", tok)
	}
	s := sim{g: m.x.g, base: m.arena}
	a := slices.Clone(m.cur)
	var b []frame
	bottom := false
	for i := range len(text) {
		b = b[:0]
		for _, c := range a {
			b = s.step(c, text[i], b)
		}
		b, bottom = s.closure(b)
		if len(b) == 0 {
			return fmt.Errorf("grammar: token %d (%q) is not allowed here (at byte %d)", tok, text, i)
		}
		a, b = b, a
	}
	// Move the frames pushed while reading into the arena.
	var memo map[int32]int32
	if len(s.local) > 0 {
		memo = map[int32]int32{}
	}
	var own func(p int32) int32
	own = func(p int32) int32 {
		if p >= -1 {
			return p
		}
		if q, ok := memo[p]; ok {
			return q
		}
		f := s.local[-p-2]
		q := m.intern(frame{f.node, own(f.parent)})
		memo[p] = q
		return q
	}
	cur := a[:0:0]
	for _, c := range a {
		cur = appendUnique(cur, frame{c.node, own(c.parent)})
	}
	slices.SortFunc(cur, func(x, y frame) int {
		if x.node != y.node {
			return int(x.node - y.node)
		}
		return int(x.parent - y.parent)
	})
	m.cur, m.complete = cur, bottom
	m.warm()
	return nil
}

// warm starts computing the node masks the current state needs that no
// matcher has computed yet, so that the next Allowed finds them ready.
func (m *Matcher) warm() {
	var cold []int32
	m.x.mu.Lock()
	for _, c := range m.cur {
		if m.x.nodes[c.node] == nil {
			cold = append(cold, c.node)
		}
	}
	m.x.mu.Unlock()
	if len(cold) == 0 {
		return
	}
	done := make(chan struct{})
	m.warming = done
	go func() {
		defer close(done)
		for _, n := range cold {
			m.x.node(n)
		}
	}()
}

// settle waits for warm's work.
func (m *Matcher) settle() {
	if m.warming != nil {
		<-m.warming
		m.warming = nil
	}
}

func (m *Matcher) intern(f frame) int32 {
	if id, ok := m.interned[f]; ok {
		return id
	}
	id := int32(len(m.arena))
	m.arena = append(m.arena, f)
	m.interned[f] = id
	return id
}
