package grammar

import (
	"fmt"
	"math/big"
	"strings"
)

// Numbers in a range, as regular languages of their decimal spellings: an
// integer range is a union of digit-by-digit ranges of each length; a
// decimal range splits into the integer part strictly inside the range
// (any fraction), and the integer parts at its ends, whose fractions are
// compared digit by digit with the bound's. Exponents are not generated
// for bounded numbers.

// bound is one end of a range: v (nil: none), excluded when excl.
type bound struct {
	v    *big.Rat
	excl bool
}

func digitsExpr(n int) Expr { return Repeat(Bytes('0', '9'), n, n) }

// sameLength matches the digit strings from a to b, both of one length.
func sameLength(a, b string) Expr {
	if a == "" {
		return Empty()
	}
	if strings.Trim(a, "0") == "" && strings.Trim(b, "9") == "" {
		return digitsExpr(len(a)) // without this, the recursion below is exponential
	}
	if a[0] == b[0] {
		return Seq(Literal(a[:1]), sameLength(a[1:], b[1:]))
	}
	n := len(a) - 1
	alts := []Expr{Seq(Literal(a[:1]), sameLength(a[1:], strings.Repeat("9", n)))}
	if a[0]+1 <= b[0]-1 {
		alts = append(alts, Seq(Bytes(a[0]+1, b[0]-1), digitsExpr(n)))
	}
	alts = append(alts, Seq(Literal(b[:1]), sameLength(strings.Repeat("0", n), b[1:])))
	return Alt(alts...)
}

// uintRange matches the canonical spellings (no leading zeros) of the
// integers from a (>= 0) to b (nil: no bound).
func uintRange(a, b *big.Int) Expr {
	var alts []Expr
	a = new(big.Int).Set(a)
	if a.Sign() == 0 {
		alts = append(alts, Literal("0"))
		a.SetInt64(1)
	}
	if b != nil && a.Cmp(b) > 0 {
		return Alt(alts...)
	}
	as := a.String()
	if b == nil {
		alts = append(alts, sameLength(as, strings.Repeat("9", len(as))))
		if len(as) < maxIntDigits {
			alts = append(alts, Seq(Bytes('1', '9'), Repeat(Bytes('0', '9'), len(as), maxIntDigits-1)))
		}
		return Alt(alts...)
	}
	bs := b.String()
	if len(as) == len(bs) {
		return Alt(append(alts, sameLength(as, bs))...)
	}
	alts = append(alts, sameLength(as, strings.Repeat("9", len(as))))
	for n := len(as) + 1; n < len(bs); n++ {
		alts = append(alts, Seq(Bytes('1', '9'), digitsExpr(n-1)))
	}
	alts = append(alts, sameLength("1"+strings.Repeat("0", len(bs)-1), bs))
	return Alt(alts...)
}

// integerRange matches the JSON integers from lo to hi (nil: no bound),
// "-0" left out.
func integerRange(lo, hi *big.Int) Expr {
	var alts []Expr
	zero := new(big.Int)
	if hi == nil || hi.Sign() >= 0 {
		a := zero
		if lo != nil && lo.Sign() > 0 {
			a = lo
		}
		alts = append(alts, uintRange(a, hi))
	}
	if lo == nil || lo.Sign() < 0 {
		m := big.NewInt(1)
		if hi != nil && hi.Sign() < 0 {
			m = new(big.Int).Neg(hi)
		}
		var top *big.Int
		if lo != nil {
			top = new(big.Int).Neg(lo)
		}
		if top == nil || m.Cmp(top) <= 0 {
			alts = append(alts, Seq(Literal("-"), uintRange(m, top)))
		}
	}
	return Alt(alts...)
}

// ceilRat and floorRat round to integers.
func floorRat(r *big.Rat) *big.Int {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() < 0 {
		q.Sub(q, big.NewInt(1))
	}
	return q
}

func ceilRat(r *big.Rat) *big.Int {
	q := floorRat(r)
	if new(big.Rat).SetInt(q).Cmp(r) != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// integerBounds turns a range of numbers into the range of the integers
// in it.
func integerBounds(lo, hi bound) (*big.Int, *big.Int) {
	var a, b *big.Int
	if lo.v != nil {
		a = ceilRat(lo.v)
		if lo.excl && new(big.Rat).SetInt(a).Cmp(lo.v) == 0 {
			a.Add(a, big.NewInt(1))
		}
	}
	if hi.v != nil {
		b = floorRat(hi.v)
		if hi.excl && new(big.Rat).SetInt(b).Cmp(hi.v) == 0 {
			b.Sub(b, big.NewInt(1))
		}
	}
	return a, b
}

// splitDecimal returns the integer part and the fraction digits (no
// trailing zeros) of r >= 0, which must have a finite decimal expansion.
func splitDecimal(r *big.Rat) (*big.Int, string, error) {
	ip := floorRat(r)
	f := new(big.Rat).Sub(r, new(big.Rat).SetInt(ip))
	var sb strings.Builder
	ten := big.NewRat(10, 1)
	for f.Sign() != 0 {
		if sb.Len() > 400 {
			return nil, "", fmt.Errorf("bound %s has too many decimal digits", r.FloatString(20))
		}
		f.Mul(f, ten)
		d := floorRat(f)
		sb.WriteByte(byte('0' + d.Int64()))
		f.Sub(f, new(big.Rat).SetInt(d))
	}
	return ip, sb.String(), nil
}

// fracAtLeast matches non-empty digit strings F with 0.F >= 0.D (> when
// strict); D has no trailing zeros. empty says whether F may be empty (the
// rest of a fraction after equal digits).
func fracAtLeast(d string, strict, empty bool) Expr {
	any := Star(Bytes('0', '9'))
	if d == "" {
		switch {
		case strict:
			return Seq(Star(Literal("0")), Bytes('1', '9'), any)
		case empty:
			return any
		}
		return Repeat(Bytes('0', '9'), 1, -1)
	}
	var alts []Expr
	if d[0] < '9' {
		alts = append(alts, Seq(Bytes(d[0]+1, '9'), any))
	}
	alts = append(alts, Seq(Literal(d[:1]), fracAtLeast(d[1:], strict, true)))
	return Alt(alts...)
}

// fracAtMost matches digit strings F with 0.F <= 0.D (< when strict),
// non-empty unless empty.
func fracAtMost(d string, strict, empty bool) Expr {
	if d == "" {
		switch {
		case strict:
			return Nothing()
		case empty:
			return Star(Literal("0"))
		}
		return Repeat(Literal("0"), 1, -1)
	}
	var alts []Expr
	if empty {
		alts = append(alts, Empty())
	}
	if d[0] > '0' {
		alts = append(alts, Seq(Bytes('0', d[0]-1), Star(Bytes('0', '9'))))
	}
	alts = append(alts, Seq(Literal(d[:1]), fracAtMost(d[1:], strict, true)))
	return Alt(alts...)
}

// magnitude matches the spellings I or I.F (no sign, no exponent) of the
// numbers from a (a.v >= 0) to b (b.v nil: no bound).
func magnitude(a, b bound) (Expr, error) {
	one := big.NewInt(1)
	ai, af, err := splitDecimal(a.v)
	if err != nil {
		return nil, err
	}
	var bi *big.Int
	var bf string
	if b.v != nil {
		if bi, bf, err = splitDecimal(b.v); err != nil {
			return nil, err
		}
	}
	var alts []Expr
	// Integers.
	lo, hi := integerBounds(a, b)
	if hi == nil || lo.Cmp(hi) <= 0 {
		alts = append(alts, uintRange(lo, hi))
	}
	var ferr error
	frac := func(f Expr) Expr {
		// At most maxFracDigits digits: the comparisons above leave the
		// length free.
		f, err := Intersect(f, Repeat(Bytes('0', '9'), 1, maxFracDigits))
		if err != nil {
			ferr = err
		}
		return Seq(Literal("."), f)
	}
	if bi == nil || ai.Cmp(bi) < 0 {
		alts = append(alts, Seq(uintRange(ai, ai), frac(fracAtLeast(af, a.excl, false))))
		var top *big.Int
		if bi != nil {
			top = new(big.Int).Sub(bi, one)
		}
		inner := new(big.Int).Add(ai, one)
		if top == nil || inner.Cmp(top) <= 0 {
			alts = append(alts, Seq(uintRange(inner, top), frac(Repeat(Bytes('0', '9'), 1, -1))))
		}
		if bi != nil {
			alts = append(alts, Seq(uintRange(bi, bi), frac(fracAtMost(bf, b.excl, false))))
		}
	} else if ai.Cmp(bi) == 0 {
		f, err := Intersect(fracAtLeast(af, a.excl, false), fracAtMost(bf, b.excl, false))
		if err != nil {
			return nil, err
		}
		alts = append(alts, Seq(uintRange(ai, ai), frac(f)))
	}
	if ferr != nil {
		return nil, ferr
	}
	return Alt(alts...), nil
}

// decimalRange matches the JSON numbers without exponent from lo to hi.
func decimalRange(lo, hi bound) (Expr, error) {
	zero := new(big.Rat)
	var alts []Expr
	if hi.v == nil || hi.v.Sign() > 0 || (hi.v.Sign() == 0 && !hi.excl) {
		a := bound{zero, false}
		if lo.v != nil && lo.v.Sign() >= 0 {
			a = lo
		}
		x, err := magnitude(a, hi)
		if err != nil {
			return nil, err
		}
		alts = append(alts, x)
	}
	if lo.v == nil || lo.v.Sign() < 0 {
		m := bound{zero, true} // "-0" is left out
		if hi.v != nil && hi.v.Sign() < 0 {
			m = bound{new(big.Rat).Neg(hi.v), hi.excl}
		}
		var top bound
		if lo.v != nil {
			top = bound{new(big.Rat).Neg(lo.v), lo.excl}
		}
		x, err := magnitude(m, top)
		if err != nil {
			return nil, err
		}
		alts = append(alts, Seq(Literal("-"), x))
	}
	return Alt(alts...), nil
}
