package grammar

import (
	"fmt"
	"unicode/utf8"
)

// rdfa is a deterministic automaton of a regular language (no calls),
// over byte classes: state 0 is the start, next[q*nclass+c] the target of
// class c from q (-1: none).
type rdfa struct {
	class  [256]uint8
	nclass int
	next   []int32
	final  []bool
}

// maxRegularStates bounds the automata that intersections build.
const maxRegularStates = 1 << 18

// regular builds the automaton of x, which must not be recursive.
func regular(x Expr) (*rdfa, error) {
	l := &lowerer{n: &nfa{}, called: map[*Rule]int32{}, budget: maxRegularStates * 4}
	start := l.n.add()
	end := l.lower(x, start)
	if l.err != nil {
		return nil, l.err
	}
	var cuts [257]bool
	cutEdges(l.n, &cuts)
	var cls classes
	cls.from(&cuts)
	d, err := determinize(l.n, start, end, &cls, maxRegularStates)
	if err != nil {
		return nil, err
	}
	return &rdfa{class: cls.of, nclass: cls.n, next: d.next, final: d.final}, nil
}

// classRanges lists the byte ranges of each class.
func (d *rdfa) classRanges() [][]byteRange {
	out := make([][]byteRange, d.nclass)
	for b := 0; b < 256; {
		c := d.class[b]
		e := b
		for e+1 < 256 && d.class[e+1] == c {
			e++
		}
		out[c] = append(out[c], byteRange{byte(b), byte(e)})
		b = e + 1
	}
	return out
}

func (d *rdfa) step(q int32, b byte) int32 {
	if q < 0 {
		return -1
	}
	return d.next[int(q)*d.nclass+int(d.class[b])]
}

// product builds the automaton of pairs of states of a and b, accepting
// where keep(finalA, finalB); a missing transition is a dead state (-1),
// which product keeps track of so that complements work.
func product(a, b *rdfa, keep func(fa, fb bool) bool) (*rdfa, error) {
	// Joint classes: bytes that both automata treat alike.
	out := &rdfa{}
	pair := map[[2]uint8]uint8{}
	reps := []byte{}
	for x := range 256 {
		k := [2]uint8{a.class[x], b.class[x]}
		c, ok := pair[k]
		if !ok {
			c = uint8(len(pair))
			pair[k] = c
			reps = append(reps, byte(x))
		}
		out.class[x] = c
	}
	out.nclass = len(pair)
	type st struct{ p, q int32 }
	index := map[st]int32{}
	var states []st
	add := func(s st) int32 {
		if id, ok := index[s]; ok {
			return id
		}
		id := int32(len(states))
		index[s] = id
		states = append(states, s)
		return id
	}
	add(st{0, 0})
	fin := func(d *rdfa, q int32) bool { return q >= 0 && d.final[q] }
	for i := 0; i < len(states); i++ {
		if len(states) > maxRegularStates {
			return nil, fmt.Errorf("%w: more than %d automaton states", errTooLarge, maxRegularStates)
		}
		s := states[i]
		out.final = append(out.final, keep(fin(a, s.p), fin(b, s.q)))
		for c := range out.nclass {
			t := st{a.step(s.p, reps[c]), b.step(s.q, reps[c])}
			if t.p < 0 && t.q < 0 {
				out.next = append(out.next, -1)
				continue
			}
			out.next = append(out.next, add(t))
		}
	}
	return out.trim(), nil
}

// trim removes the states from which no final state can be reached.
func (d *rdfa) trim() *rdfa {
	n := len(d.final)
	live := make([]bool, n)
	copy(live, d.final)
	for changed := true; changed; {
		changed = false
		for q := range n {
			if live[q] {
				continue
			}
			for c := range d.nclass {
				if t := d.next[q*d.nclass+c]; t >= 0 && live[t] {
					live[q], changed = true, true
					break
				}
			}
		}
	}
	for i, t := range d.next {
		if t >= 0 && !live[t] {
			d.next[i] = -1
		}
	}
	return d
}

// empty reports whether d accepts nothing.
func (d *rdfa) empty() bool {
	if d.final[0] {
		return false
	}
	for c := range d.nclass {
		if d.next[c] >= 0 {
			return false
		}
	}
	return true
}

// Intersect matches the strings both a and b match. Both must be regular
// (without recursive rules).
func Intersect(a, b Expr) (Expr, error) {
	da, err := regular(a)
	if err != nil {
		return nil, err
	}
	db, err := regular(b)
	if err != nil {
		return nil, err
	}
	d, err := product(da, db, func(x, y bool) bool { return x && y })
	if err != nil {
		return nil, err
	}
	if d.empty() {
		return Nothing(), nil
	}
	return dfaExpr{d}, nil
}

// Minus matches the strings a matches and b does not. Both must be
// regular.
func Minus(a, b Expr) (Expr, error) {
	da, err := regular(a)
	if err != nil {
		return nil, err
	}
	db, err := regular(b)
	if err != nil {
		return nil, err
	}
	d, err := product(da, db, func(x, y bool) bool { return x && !y })
	if err != nil {
		return nil, err
	}
	if d.empty() {
		return Nothing(), nil
	}
	return dfaExpr{d}, nil
}

// notContaining is the automaton of the byte strings in which p (non-empty)
// does not occur: the Knuth-Morris-Pratt automaton of p without its
// accepting state.
func notContaining(p string) *rdfa {
	m := len(p)
	fail := make([]int, m+1)
	fail[0] = -1
	for i, k := 1, 0; i < m; i++ {
		for k > 0 && p[i] != p[k] {
			k = fail[k]
		}
		if p[i] == p[k] {
			k++
		}
		fail[i+1] = k
	}
	// delta(q, b): the length of the longest prefix of p that is a suffix
	// of p[:q]+b.
	delta := func(q int, b byte) int {
		for {
			if q < m && p[q] == b {
				return q + 1
			}
			if q == 0 {
				return 0
			}
			q = fail[q]
		}
	}
	d := &rdfa{}
	var cuts [257]bool
	for i := range m {
		cuts[p[i]] = true
		cuts[int(p[i])+1] = true
	}
	var cls classes
	cls.from(&cuts)
	d.class, d.nclass = cls.of, cls.n
	reps := make([]byte, cls.n)
	for b := 255; b >= 0; b-- {
		reps[cls.of[b]] = byte(b)
	}
	for q := range m {
		d.final = append(d.final, true)
		for c := range cls.n {
			t := delta(q, reps[c])
			if t == m {
				d.next = append(d.next, -1)
			} else {
				d.next = append(d.next, int32(t))
			}
		}
	}
	return d
}

// TextUntil matches any UTF-8 text in which stop does not occur, followed
// by stop: everything up to and including the first occurrence of stop.
func TextUntil(stop string) Expr {
	x, err := TextWithout(Star(UTF8Char()), stop)
	if err != nil {
		// Star(UTF8Char()) has a handful of states; its product with the
		// automaton of stop is bounded by their product.
		panic(err)
	}
	return Seq(x, Literal(stop))
}

// TextWithout matches the strings of text (regular) in which stop does not
// occur. stop must be valid UTF-8 and non-empty.
func TextWithout(text Expr, stop string) (Expr, error) {
	if stop == "" || !utf8.ValidString(stop) {
		return nil, fmt.Errorf("grammar: stop text %q must be non-empty valid UTF-8", stop)
	}
	dt, err := regular(text)
	if err != nil {
		return nil, err
	}
	d, err := product(dt, notContaining(stop), func(x, y bool) bool { return x && y })
	if err != nil {
		return nil, err
	}
	if d.empty() {
		return Nothing(), nil
	}
	return dfaExpr{d}, nil
}

// UTF8Char matches one well-formed UTF-8 encoded scalar value (no
// surrogates, no overlong forms).
func UTF8Char() Expr { return utf8Except(nil) }

// utf8Except is one UTF-8 scalar value, of which ASCII bytes in excl are
// left out.
func utf8Except(excl []byte) Expr {
	cont := Bytes(0x80, 0xBF)
	var ascii []byteRange
	lo := 0
	for b := 0; b <= 0x80; b++ {
		skip := b == 0x80
		for _, e := range excl {
			if int(e) == b {
				skip = true
			}
		}
		if skip {
			if lo < b {
				ascii = append(ascii, byteRange{byte(lo), byte(b - 1)})
			}
			lo = b + 1
		}
	}
	return Alt(
		classExpr{ascii},
		Seq(Bytes(0xC2, 0xDF), cont),
		Seq(Literal("\xE0"), Bytes(0xA0, 0xBF), cont),
		Seq(Bytes(0xE1, 0xEC), cont, cont),
		Seq(Literal("\xED"), Bytes(0x80, 0x9F), cont),
		Seq(Bytes(0xEE, 0xEF), cont, cont),
		Seq(Literal("\xF0"), Bytes(0x90, 0xBF), cont, cont),
		Seq(Bytes(0xF1, 0xF3), cont, cont, cont),
		Seq(Literal("\xF4"), Bytes(0x80, 0x8F), cont, cont),
	)
}
