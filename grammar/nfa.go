package grammar

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// nfa is a Thompson automaton over bytes with call edges: a call edge
// enters another rule and, when that rule's text ends, continues at its
// target.
type nfa struct {
	eps   [][]int32
	edges [][]nedge
	calls [][]ncall
}

type nedge struct {
	lo, hi byte
	to     int32
}

type ncall struct{ rule, to int32 }

func (n *nfa) add() int32 {
	n.eps = append(n.eps, nil)
	n.edges = append(n.edges, nil)
	n.calls = append(n.calls, nil)
	return int32(len(n.eps) - 1)
}

// errTooLarge is wrapped when a grammar would exceed its state budget.
var errTooLarge = errors.New("grammar too large")

// lowerer builds an NFA from expressions, inlining the rules it may and
// calling the others.
type lowerer struct {
	n      *nfa
	called map[*Rule]int32 // rules that are called, by index
	budget int
	err    error
	depth  int
}

func (l *lowerer) state() int32 {
	if len(l.n.eps) >= l.budget && l.err == nil {
		l.err = fmt.Errorf("%w: more than %d automaton states", errTooLarge, l.budget)
	}
	return l.n.add()
}

// lower adds x from state s and returns the state where it ends.
func (l *lowerer) lower(x Expr, s int32) int32 {
	if l.err != nil {
		return s
	}
	switch x := x.(type) {
	case litExpr:
		for i := range len(x.s) {
			t := l.state()
			l.n.edges[s] = append(l.n.edges[s], nedge{x.s[i], x.s[i], t})
			s = t
		}
		return s
	case classExpr:
		t := l.state()
		for _, r := range x.r {
			l.n.edges[s] = append(l.n.edges[s], nedge{r.lo, r.hi, t})
		}
		return t
	case seqExpr:
		for _, y := range x.xs {
			s = l.lower(y, s)
		}
		return s
	case altExpr:
		end := l.state()
		for _, y := range x.xs {
			a := l.state()
			l.n.eps[s] = append(l.n.eps[s], a)
			e := l.lower(y, a)
			l.n.eps[e] = append(l.n.eps[e], end)
		}
		return end
	case repExpr:
		for range x.min {
			s = l.lower(x.x, s)
			if l.err != nil {
				return s
			}
		}
		if x.max < 0 {
			loop := l.state()
			l.n.eps[s] = append(l.n.eps[s], loop)
			e := l.lower(x.x, loop)
			l.n.eps[e] = append(l.n.eps[e], loop)
			return loop
		}
		end := l.state()
		for range x.max - x.min {
			l.n.eps[s] = append(l.n.eps[s], end)
			s = l.lower(x.x, s)
			if l.err != nil {
				return s
			}
		}
		l.n.eps[s] = append(l.n.eps[s], end)
		return end
	case refExpr:
		if x.r.body == nil {
			l.err = fmt.Errorf("rule %s is used but never defined", x.r.name)
			return s
		}
		if id, ok := l.called[x.r]; ok {
			t := l.state()
			l.n.calls[s] = append(l.n.calls[s], ncall{id, t})
			return t
		}
		l.depth++
		if l.depth > 10000 {
			l.err = fmt.Errorf("rule %s: inlining too deep", x.r.name)
			return s
		}
		e := l.lower(x.r.body, s)
		l.depth--
		return e
	case dfaExpr:
		d := x.d
		ranges := d.classRanges()
		ids := make([]int32, len(d.final))
		ids[0] = s
		for i := 1; i < len(ids); i++ {
			ids[i] = l.state()
		}
		end := l.state()
		for q := range d.final {
			for c := range d.nclass {
				if t := d.next[q*d.nclass+c]; t >= 0 {
					for _, r := range ranges[c] {
						l.n.edges[ids[q]] = append(l.n.edges[ids[q]], nedge{r.lo, r.hi, ids[t]})
					}
				}
			}
			if d.final[q] {
				l.n.eps[ids[q]] = append(l.n.eps[ids[q]], end)
			}
		}
		return end
	case netExpr:
		ids := make([]int32, x.nodes)
		ids[0] = s
		for i := 1; i < x.nodes; i++ {
			ids[i] = l.state()
		}
		end := l.state()
		for _, e := range x.edges {
			a := l.state()
			l.n.eps[ids[e.from]] = append(l.n.eps[ids[e.from]], a)
			b := l.lower(e.x, a)
			l.n.eps[b] = append(l.n.eps[b], ids[e.to])
		}
		for i, f := range x.final {
			if f {
				l.n.eps[ids[i]] = append(l.n.eps[ids[i]], end)
			}
		}
		return end
	}
	l.err = fmt.Errorf("unknown expression %T", x)
	return s
}

// classes partitions the bytes into intervals that no edge of an
// automaton splits, so that transitions are kept per class, not per byte.
type classes struct {
	of [256]uint8
	n  int
}

func (c *classes) from(cuts *[257]bool) {
	cuts[0] = true
	k := -1
	for b := range 256 {
		if cuts[b] {
			k++
		}
		c.of[b] = uint8(k)
	}
	c.n = k + 1
}

func cutEdges(n *nfa, cuts *[257]bool) {
	for _, es := range n.edges {
		for _, e := range es {
			cuts[e.lo] = true
			cuts[int(e.hi)+1] = true
		}
	}
}

// dfa is what determinize makes: per state, the target of each class
// (-1: none), whether the state accepts, and its call edges (callee rule,
// target).
type dfa struct {
	next  []int32
	final []bool
	calls [][]ncall
}

// determinize runs the subset construction on n from start, accepting in
// accept, over the byte classes cls, with at most limit states.
func determinize(n *nfa, start, accept int32, cls *classes, limit int) (*dfa, error) {
	d := &dfa{}
	mark := make([]uint32, len(n.eps))
	gen := uint32(0)
	var stack []int32
	closure := func(set []int32) []int32 {
		gen++
		stack = stack[:0]
		var out []int32
		for _, s := range set {
			if mark[s] != gen {
				mark[s] = gen
				stack = append(stack, s)
			}
		}
		for len(stack) > 0 {
			s := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			out = append(out, s)
			for _, t := range n.eps[s] {
				if mark[t] != gen {
					mark[t] = gen
					stack = append(stack, t)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	index := map[string]int32{}
	var sets [][]int32
	var keyBuf []byte
	intern := func(set []int32) int32 {
		keyBuf = keyBuf[:0]
		for _, s := range set {
			keyBuf = binary.LittleEndian.AppendUint32(keyBuf, uint32(s))
		}
		if id, ok := index[string(keyBuf)]; ok {
			return id
		}
		id := int32(len(sets))
		index[string(keyBuf)] = id
		sets = append(sets, set)
		return id
	}
	intern(closure([]int32{start}))
	tgt := make([][]int32, cls.n)
	for q := 0; q < len(sets); q++ {
		if len(sets) > limit {
			return nil, fmt.Errorf("%w: more than %d automaton states", errTooLarge, limit)
		}
		set := sets[q]
		for c := range tgt {
			tgt[c] = tgt[c][:0]
		}
		final := false
		var calls map[int32][]int32
		for _, s := range set {
			if s == accept {
				final = true
			}
			for _, e := range n.edges[s] {
				for c := cls.of[e.lo]; ; c++ {
					tgt[c] = append(tgt[c], e.to)
					if int(c) == int(cls.of[e.hi]) {
						break
					}
				}
			}
			for _, k := range n.calls[s] {
				if calls == nil {
					calls = map[int32][]int32{}
				}
				calls[k.rule] = append(calls[k.rule], k.to)
			}
		}
		row := make([]int32, cls.n)
		for c := range row {
			row[c] = -1
			if len(tgt[c]) > 0 {
				row[c] = intern(closure(tgt[c]))
			}
		}
		d.next = append(d.next, row...)
		d.final = append(d.final, final)
		var cs []ncall
		for r, ts := range calls {
			cs = append(cs, ncall{r, intern(closure(ts))})
		}
		slices.SortFunc(cs, func(a, b ncall) int { return int(a.rule - b.rule) })
		d.calls = append(d.calls, cs)
	}
	return d, nil
}
