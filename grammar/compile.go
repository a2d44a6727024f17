package grammar

import (
	"errors"
	"fmt"
)

// Grammar is a compiled grammar over bytes: one deterministic automaton per
// rule that is called (the start expression's, recursive rules', and rules
// too large to copy into every place that uses them), whose nodes are
// numbered across the whole grammar. A node has a transition per byte
// class, may accept (its rule's text may end there) and may call rules.
// Text is matched by a pushdown: a call pushes the node to continue at.
//
// Every node of a compiled grammar can reach an accepting one, so any
// prefix the grammar allows can be completed. A Grammar is immutable and
// safe for concurrent use.
type Grammar struct {
	nclass int
	class  [256]uint8
	next   []int32 // node*nclass + class: target node, or -1
	final  []bool
	hasOut []bool   // has a transition or a call
	calls  [][]call // per node; nil for most
	start  []int32  // per called rule: its start node
	names  []string // per called rule
	root   int32    // the start node of the whole grammar
}

type call struct{ start, ret int32 }

// Nodes is the number of automaton nodes.
func (g *Grammar) Nodes() int { return len(g.final) }

// Limits of Compile.
const (
	maxNodes    = 1 << 17 // automaton nodes of a whole grammar (its tables: nodes × byte classes × 4 bytes)
	inlineLimit = 2048    // a rule larger than this (in NFA states) is called, not copied
)

// ErrEmpty is wrapped when a grammar matches no string at all.
var ErrEmpty = errors.New("grammar: the grammar matches nothing")

// Compile compiles x.
func Compile(x Expr) (*Grammar, error) {
	root := &Rule{name: "root", body: x}
	rules := reachableRules(root)
	rec := recursiveRules(rules)
	called := map[*Rule]int32{root: 0}
	order := []*Rule{root}
	sizes := map[*Rule]int{}
	for _, r := range rules {
		if r == root {
			continue
		}
		if rec[r] || exprSize(r.body, sizes, rec) > inlineLimit {
			called[r] = int32(len(order))
			order = append(order, r)
		}
	}
	// One NFA for all rules (each with its own start and accepting state).
	l := &lowerer{n: &nfa{}, called: called, budget: 4 * maxNodes}
	starts := make([]int32, len(order))
	ends := make([]int32, len(order))
	for i, r := range order {
		starts[i] = l.n.add()
		ends[i] = l.lower(r.body, starts[i])
		if l.err != nil {
			return nil, fmt.Errorf("grammar: %w", l.err)
		}
	}
	var cuts [257]bool
	cutEdges(l.n, &cuts)
	g := &Grammar{}
	var cls classes
	cls.from(&cuts)
	g.class, g.nclass = cls.of, cls.n
	type ruleDFA struct {
		d    *dfa
		base int32
	}
	dfas := make([]ruleDFA, len(order))
	total := 0
	for i := range order {
		d, err := determinize(l.n, starts[i], ends[i], &cls, maxNodes-total)
		if err != nil {
			return nil, fmt.Errorf("grammar: rule %s: %w", order[i].name, err)
		}
		dfas[i] = ruleDFA{d, int32(total)}
		total += len(d.final)
		g.start = append(g.start, int32(dfas[i].base))
		g.names = append(g.names, order[i].name)
	}
	g.next = make([]int32, 0, total*g.nclass)
	g.calls = make([][]call, total)
	for _, rd := range dfas {
		for _, t := range rd.d.next {
			if t >= 0 {
				t += rd.base
			}
			g.next = append(g.next, t)
		}
		g.final = append(g.final, rd.d.final...)
		for q, cs := range rd.d.calls {
			for _, c := range cs {
				g.calls[int(rd.base)+q] = append(g.calls[int(rd.base)+q], call{g.start[c.rule], c.to + rd.base})
			}
		}
	}
	g.root = g.start[0]
	if err := g.prune(); err != nil {
		return nil, err
	}
	return g, nil
}

// prune drops the transitions and calls that lead where no text can end,
// and checks that called rules match no empty string and are not left
// recursive (which the pushdown could not run).
func (g *Grammar) prune() error {
	n := len(g.final)
	live := make([]bool, n)
	copy(live, g.final)
	for changed := true; changed; {
		changed = false
		for q := range n {
			if live[q] {
				continue
			}
			ok := false
			for c := range g.nclass {
				if t := g.next[q*g.nclass+c]; t >= 0 && live[t] {
					ok = true
					break
				}
			}
			for _, k := range g.calls[q] {
				if !ok && live[k.start] && live[k.ret] {
					ok = true
				}
			}
			if ok {
				live[q], changed = true, true
			}
		}
	}
	if !live[g.root] {
		return ErrEmpty
	}
	g.hasOut = make([]bool, n)
	for q := range n {
		for c := range g.nclass {
			i := q*g.nclass + c
			if t := g.next[i]; t >= 0 && !live[t] {
				g.next[i] = -1
			} else if t >= 0 {
				g.hasOut[q] = true
			}
		}
		var cs []call
		for _, k := range g.calls[q] {
			if live[k.start] && live[k.ret] {
				cs = append(cs, k)
			}
		}
		g.calls[q] = cs
		if len(cs) > 0 {
			g.hasOut[q] = true
		}
	}
	ruleAt := map[int32]int{}
	for i, s := range g.start {
		ruleAt[s] = i
	}
	for i, s := range g.start[1:] {
		if g.final[s] {
			return fmt.Errorf("grammar: rule %s matches the empty string, which a called rule may not", g.names[i+1])
		}
	}
	// Left recursion: a rule that, before reading a byte, calls a rule
	// that calls back to it.
	state := make([]uint8, len(g.start)) // 0 new, 1 on the path, 2 done
	var visit func(r int) error
	visit = func(r int) error {
		state[r] = 1
		for _, k := range g.calls[g.start[r]] {
			s := ruleAt[k.start]
			switch state[s] {
			case 1:
				return fmt.Errorf("grammar: rule %s is left recursive (it reaches itself before reading a byte)", g.names[s])
			case 0:
				if err := visit(s); err != nil {
					return err
				}
			}
		}
		state[r] = 2
		return nil
	}
	for r := range g.start {
		if state[r] == 0 {
			if err := visit(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// reachableRules lists the rules x's expressions refer to, x first.
func reachableRules(x *Rule) []*Rule {
	seen := map[*Rule]bool{x: true}
	out := []*Rule{x}
	var walk func(e Expr)
	walk = func(e Expr) {
		switch e := e.(type) {
		case seqExpr:
			for _, y := range e.xs {
				walk(y)
			}
		case altExpr:
			for _, y := range e.xs {
				walk(y)
			}
		case repExpr:
			walk(e.x)
		case netExpr:
			for _, ed := range e.edges {
				walk(ed.x)
			}
		case refExpr:
			if !seen[e.r] {
				seen[e.r] = true
				out = append(out, e.r)
				if e.r.body != nil {
					walk(e.r.body)
				}
			}
		}
	}
	walk(x.body)
	return out
}

// refs lists the rules e refers to directly.
func refs(e Expr, f func(*Rule)) {
	switch e := e.(type) {
	case seqExpr:
		for _, y := range e.xs {
			refs(y, f)
		}
	case altExpr:
		for _, y := range e.xs {
			refs(y, f)
		}
	case repExpr:
		refs(e.x, f)
	case netExpr:
		for _, ed := range e.edges {
			refs(ed.x, f)
		}
	case refExpr:
		f(e.r)
	}
}

// recursiveRules finds the rules on a cycle of references (Tarjan's
// strongly connected components).
func recursiveRules(rules []*Rule) map[*Rule]bool {
	index := map[*Rule]int{}
	low := map[*Rule]int{}
	on := map[*Rule]bool{}
	var stack []*Rule
	rec := map[*Rule]bool{}
	next := 0
	var strong func(r *Rule)
	strong = func(r *Rule) {
		index[r], low[r] = next, next
		next++
		stack = append(stack, r)
		on[r] = true
		if r.body != nil {
			refs(r.body, func(s *Rule) {
				if _, ok := index[s]; !ok {
					strong(s)
					low[r] = min(low[r], low[s])
				} else if on[s] {
					low[r] = min(low[r], index[s])
				}
				if s == r {
					rec[r] = true
				}
			})
		}
		if low[r] == index[r] {
			var comp []*Rule
			for {
				s := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[s] = false
				comp = append(comp, s)
				if s == r {
					break
				}
			}
			if len(comp) > 1 {
				for _, s := range comp {
					rec[s] = true
				}
			}
		}
	}
	for _, r := range rules {
		if _, ok := index[r]; !ok {
			strong(r)
		}
	}
	return rec
}

// exprSize estimates the NFA states of x with non-recursive rules inlined
// (saturating, so that huge expressions compare as huge).
func exprSize(x Expr, memo map[*Rule]int, rec map[*Rule]bool) int {
	const big = 1 << 40
	sat := func(v int) int { return min(v, big) }
	switch x := x.(type) {
	case litExpr:
		return len(x.s) + 1
	case classExpr:
		return 2
	case seqExpr:
		n := 1
		for _, y := range x.xs {
			n = sat(n + exprSize(y, memo, rec))
		}
		return n
	case altExpr:
		n := 2
		for _, y := range x.xs {
			n = sat(n + exprSize(y, memo, rec) + 1)
		}
		return n
	case repExpr:
		k := x.max
		if k < 0 {
			k = x.min + 1
		}
		return sat(2 + k*min(exprSize(x.x, memo, rec), big/(k+1)))
	case refExpr:
		if rec[x.r] || x.r.body == nil {
			return 2
		}
		if n, ok := memo[x.r]; ok {
			return n
		}
		memo[x.r] = 2 // guards against cycles the rec check missed
		n := exprSize(x.r.body, memo, rec)
		memo[x.r] = n
		return n
	case dfaExpr:
		return len(x.d.final) + 1
	case netExpr:
		n := x.nodes + 1
		for _, e := range x.edges {
			n = sat(n + exprSize(e.x, memo, rec) + 1)
		}
		return n
	}
	return 1
}
