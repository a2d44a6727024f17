package grammar

// Options say how JSON text is laid out.
type Options struct {
	// Whitespace is the most bytes of insignificant whitespace (space, tab,
	// LF, CR) allowed at each place JSON allows it: around the whole value,
	// after '{', '[', ',' and ':', and before ':', ',', '}' and ']'. 0, the
	// default, allows none: compact JSON, as OpenAI's structured outputs
	// produce. A bound, rather than any amount, keeps a model from filling
	// its whole budget with blank lines.
	Whitespace int
}

// ws is the insignificant whitespace allowed at one place.
func (o Options) ws() Expr {
	if o.Whitespace <= 0 {
		return Empty()
	}
	return Repeat(OneOf(" \t\n\r"), 0, o.Whitespace)
}

// hex is one hexadecimal digit.
func hex() Expr { return classExpr{[]byteRange{{'0', '9'}, {'A', 'F'}, {'a', 'f'}}} }

// jsonChar is one character of a JSON string's contents: an unescaped
// UTF-8 scalar value (not '"', '\\' or a control character), a
// one-character escape, or \u escapes of one scalar value (a surrogate
// pair together; a lone surrogate is not a character). Each is one code
// point, as minLength and maxLength count them.
func jsonChar() Expr {
	ctl := make([]byte, 0, 34)
	for b := range 0x20 {
		ctl = append(ctl, byte(b))
	}
	ctl = append(ctl, '"', '\\')
	h := hex()
	nonSurrogate := Alt(
		Seq(classExpr{[]byteRange{{'0', '9'}, {'A', 'C'}, {'a', 'c'}, {'E', 'F'}, {'e', 'f'}}}, h, h, h),
		Seq(OneOf("Dd"), Bytes('0', '7'), h, h),
	)
	high := Seq(OneOf("Dd"), OneOf("89ABab"), h, h)
	low := Seq(OneOf("Dd"), classExpr{[]byteRange{{'C', 'F'}, {'c', 'f'}}}, h, h)
	return Alt(
		utf8Except(ctl),
		Seq(Literal("\\"), Alt(
			OneOf("\"\\/bfnrt"),
			Seq(Literal("u"), nonSurrogate),
			Seq(Literal("u"), high, Literal("\\u"), low),
		)),
	)
}

// JSONString matches a JSON string of min to max characters (max < 0: no
// bound), quotes included.
func JSONString(min, max int) Expr {
	return Seq(Literal(`"`), Repeat(jsonChar(), min, max), Literal(`"`))
}

// Digits a number may have where nothing else bounds them: a model that
// knows no better would otherwise write zeros until its budget runs out.
// Every int64 and every float64 (in its shortest form) fits.
const (
	maxIntDigits  = 20
	maxFracDigits = 17
	maxExpDigits  = 3
)

// jsonInt is an integer in JSON's syntax, of at most maxIntDigits digits.
func jsonInt() Expr {
	return Seq(Optional(Literal("-")), Alt(Literal("0"), Seq(Bytes('1', '9'), Repeat(Bytes('0', '9'), 0, maxIntDigits-1))))
}

// JSONNumber matches the JSON numbers of at most 20 integer digits, 17
// fraction digits and 3 exponent digits.
func JSONNumber() Expr {
	return Seq(jsonInt(),
		Optional(Seq(Literal("."), Repeat(Bytes('0', '9'), 1, maxFracDigits))),
		Optional(Seq(OneOf("eE"), Optional(OneOf("+-")), Repeat(Bytes('0', '9'), 1, maxExpDigits))))
}

// JSONValue matches any JSON value laid out as opt says.
func JSONValue(opt Options) Expr {
	r := NewRule("json value")
	r.Define(jsonAny(r.Ref(), opt))
	return Seq(opt.ws(), r.Ref(), opt.ws())
}

// JSONObject matches any JSON object laid out as opt says.
func JSONObject(opt Options) Expr {
	r := NewRule("json value")
	r.Define(jsonAny(r.Ref(), opt))
	return Seq(opt.ws(), jsonObjectOf(JSONString(0, -1), r.Ref(), opt), opt.ws())
}

func jsonAny(value Expr, opt Options) Expr {
	return Alt(
		jsonObjectOf(JSONString(0, -1), value, opt),
		jsonArrayOf(value, 0, -1, opt),
		JSONString(0, -1),
		JSONNumber(),
		Literal("true"), Literal("false"), Literal("null"),
	)
}

// jsonObjectOf is an object of any number of members key: value.
func jsonObjectOf(key, value Expr, opt Options) Expr {
	ws := opt.ws()
	member := Seq(key, ws, Literal(":"), ws, value, ws)
	return Seq(Literal("{"), ws, Optional(Seq(member, Star(Seq(Literal(","), ws, member)))), Literal("}"))
}

// jsonArrayOf is an array of min to max items (max < 0: no bound).
func jsonArrayOf(item Expr, min, max int, opt Options) Expr {
	return jsonTuple(nil, item, min, max, opt)
}

// jsonTuple is an array whose first items match prefix, in order, and
// whose others match rest (nil: no others), min to max items in all.
func jsonTuple(prefix []Expr, rest Expr, min, max int, opt Options) Expr {
	ws := opt.ws()
	at := func(i int) Expr {
		if i < len(prefix) {
			return prefix[i]
		}
		return rest
	}
	if rest == nil && (max < 0 || max > len(prefix)) {
		max = len(prefix)
	}
	if max >= 0 && max < min {
		return Nothing()
	}
	// items(i): the items from i on, i items being there already.
	var items func(i int) Expr
	items = func(i int) Expr {
		sep := Empty()
		if i > 0 {
			sep = Seq(Literal(","), ws)
		}
		if max >= 0 && i >= max {
			return Empty()
		}
		if i >= len(prefix) && max < 0 && i >= min {
			more := Star(Seq(Literal(","), ws, rest, ws))
			if i == 0 {
				return Optional(Seq(rest, ws, more))
			}
			return more
		}
		x := at(i)
		if x == nil {
			return Empty()
		}
		one := Seq(sep, x, ws, items(i+1))
		if i < min {
			return one
		}
		return Optional(one)
	}
	return Seq(Literal("["), ws, items(0), Literal("]"))
}
