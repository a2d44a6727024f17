package grammar

import "fmt"

// Expr is a grammar expression: a set of byte strings. Expressions are
// immutable values that can be shared between grammars; Compile turns one
// into a Grammar.
type Expr interface{ isExpr() }

type (
	// litExpr is one literal byte string.
	litExpr struct{ s string }
	// classExpr is one byte from a set of ranges.
	classExpr struct{ r []byteRange }
	seqExpr   struct{ xs []Expr }
	// altExpr with no alternatives is the empty language.
	altExpr struct{ xs []Expr }
	// repExpr is x repeated min to max times (max < 0: no bound).
	repExpr struct {
		x        Expr
		min, max int
	}
	// refExpr stands for a rule's body; recursive rules are called (a
	// pushdown), others may be inlined.
	refExpr struct{ r *Rule }
	// dfaExpr is a regular language given by a deterministic automaton
	// (intersections and complements are built this way).
	dfaExpr struct{ d *rdfa }
	// netExpr is a small automaton whose edges are expressions: node 0
	// is the start, edges go from one node to another, and the language is
	// every path from the start to a final node. It lets a sequence of
	// optional parts share its tails instead of copying them.
	netExpr struct {
		nodes int
		edges []netEdge
		final []bool
	}
)

type netEdge struct {
	from, to int
	x        Expr
}

type byteRange struct{ lo, hi byte }

func (litExpr) isExpr()   {}
func (classExpr) isExpr() {}
func (seqExpr) isExpr()   {}
func (altExpr) isExpr()   {}
func (repExpr) isExpr()   {}
func (refExpr) isExpr()   {}
func (dfaExpr) isExpr()   {}
func (netExpr) isExpr()   {}

// Rule is a named expression that other expressions refer to, possibly
// before it is defined, so that a grammar may be recursive (a JSON value
// contains JSON values). Define it once with Define.
type Rule struct {
	name string
	body Expr
}

// NewRule returns an undefined rule; name appears in error messages.
func NewRule(name string) *Rule { return &Rule{name: name} }

// Define sets the rule's body. It panics if the rule is already defined:
// a rule means one thing.
func (r *Rule) Define(body Expr) {
	if r.body != nil {
		panic(fmt.Sprintf("grammar: rule %s defined twice", r.name))
	}
	r.body = body
}

// Ref is an expression standing for the rule's body.
func (r *Rule) Ref() Expr { return refExpr{r} }

// Literal matches exactly s (any bytes).
func Literal(s string) Expr { return litExpr{s} }

// Bytes matches one byte in [lo, hi].
func Bytes(lo, hi byte) Expr { return classExpr{[]byteRange{{lo, hi}}} }

// OneOf matches one byte of set.
func OneOf(set string) Expr {
	r := make([]byteRange, len(set))
	for i := range len(set) {
		r[i] = byteRange{set[i], set[i]}
	}
	return classExpr{r}
}

// Seq matches the concatenation of xs; with none, the empty string.
func Seq(xs ...Expr) Expr {
	var flat []Expr
	for _, x := range xs {
		switch x := x.(type) {
		case seqExpr:
			flat = append(flat, x.xs...)
		case altExpr:
			if len(x.xs) == 0 {
				return Nothing()
			}
			flat = append(flat, x)
		case litExpr:
			if x.s != "" {
				flat = append(flat, x)
			}
		default:
			flat = append(flat, x)
		}
	}
	if len(flat) == 1 {
		return flat[0]
	}
	return seqExpr{flat}
}

// Alt matches any of xs; with none, nothing at all.
func Alt(xs ...Expr) Expr {
	var flat []Expr
	for _, x := range xs {
		if a, ok := x.(altExpr); ok {
			flat = append(flat, a.xs...)
			continue
		}
		flat = append(flat, x)
	}
	if len(flat) == 1 {
		return flat[0]
	}
	return altExpr{flat}
}

// Nothing matches no string at all (the empty language).
func Nothing() Expr { return altExpr{} }

// Empty matches only the empty string.
func Empty() Expr { return seqExpr{} }

// Optional matches x or the empty string.
func Optional(x Expr) Expr { return Repeat(x, 0, 1) }

// Star matches x any number of times.
func Star(x Expr) Expr { return Repeat(x, 0, -1) }

// Repeat matches x at least min and at most max times (max < 0: no upper
// bound).
func Repeat(x Expr, min, max int) Expr {
	if min < 0 {
		min = 0
	}
	if max >= 0 && max < min {
		return Nothing()
	}
	if max == 0 {
		return Empty()
	}
	if min == 1 && max == 1 {
		return x
	}
	return repExpr{x, min, max}
}

// IsNothing reports whether x is syntactically the empty language, as
// Nothing, an Alt of no alternatives, and the parts of a schema that admit
// no value are (Property.Text, Property.NonString). A language that is
// empty only semantically (an Intersect of disjoint languages) may not be
// reported.
func IsNothing(x Expr) bool { return isNothing(x) }

// isNothing reports whether x is syntactically the empty language.
func isNothing(x Expr) bool {
	a, ok := x.(altExpr)
	return ok && len(a.xs) == 0
}
