package grammar

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// SchemaError says what in a schema cannot be compiled and where.
type SchemaError struct {
	Path    string // JSON pointer of the schema ("#", "#/properties/name")
	Keyword string // the keyword at fault; "" when it is the schema itself
	Msg     string
}

func (e *SchemaError) Error() string {
	if e.Keyword != "" {
		return fmt.Sprintf("grammar: schema at %s: %s: %s", e.Path, e.Keyword, e.Msg)
	}
	return fmt.Sprintf("grammar: schema at %s: %s", e.Path, e.Msg)
}

// ErrUnsupported is wrapped by SchemaErrors for keywords the compiler does
// not implement.
var ErrUnsupported = errors.New("not supported")

func (e *SchemaError) Unwrap() error {
	if strings.Contains(e.Msg, "not supported") {
		return ErrUnsupported
	}
	return nil
}

// Limits on what a schema unrolls. Longer strings and arrays than these
// are not generated (the output still satisfies maxLength and maxItems);
// a minimum above them is an error.
const (
	maxStringChars = 1024
	maxArrayItems  = 256
)

// Schema is a JSON Schema document ready to be compiled into grammar
// expressions (see the package documentation for the keywords it
// supports).
type Schema struct {
	root  *jvalue
	opt   Options
	rules map[string]*Rule // $ref targets, by pointer and kinds
	any   *Rule            // any JSON value
}

// ParseSchema reads a JSON Schema document.
func ParseSchema(data []byte, opt Options) (*Schema, error) {
	v, err := parseJSON(data)
	if err != nil {
		return nil, &SchemaError{Path: "#", Msg: fmt.Sprintf("not valid JSON: %v", err)}
	}
	if v.kind != jObject && v.kind != jBool {
		return nil, &SchemaError{Path: "#", Msg: fmt.Sprintf("a schema is an object or a boolean, not %s", v.kind)}
	}
	return &Schema{root: v, opt: opt, rules: map[string]*Rule{}}, nil
}

// CompileSchema compiles a JSON Schema into the grammar of the JSON
// documents it generates (each valid under the schema).
func CompileSchema(data []byte, opt Options) (*Grammar, error) {
	s, err := ParseSchema(data, opt)
	if err != nil {
		return nil, err
	}
	x, err := s.Value()
	if err != nil {
		return nil, err
	}
	g, err := Compile(Seq(opt.ws(), x, opt.ws()))
	if errors.Is(err, ErrEmpty) {
		return nil, &SchemaError{Path: "#", Msg: "no JSON value satisfies the schema"}
	}
	return g, err
}

// Value is the expression of the JSON values the whole schema generates,
// without surrounding whitespace.
func (s *Schema) Value() (Expr, error) { return s.compile(s.root, "#", allKinds, false) }

// kinds is a set of JSON types to generate; number includes integers.
type kinds uint8

const (
	kNull kinds = 1 << iota
	kBool
	kInteger
	kNumber
	kString
	kArray
	kObject
	allKinds = kNull | kBool | kInteger | kNumber | kString | kArray | kObject
)

var kindNames = map[string]kinds{
	"null": kNull, "boolean": kBool, "integer": kInteger, "number": kNumber | kInteger,
	"string": kString, "array": kArray, "object": kObject,
}

// Keywords that only annotate: they do not change which documents are
// valid. "format" is an annotation in JSON Schema 2020-12 unless a
// validator opts into asserting it.
var annotations = map[string]bool{
	"title": true, "description": true, "$schema": true, "$id": true, "$comment": true,
	"examples": true, "default": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"format": true, "contentEncoding": true, "contentMediaType": true, "$defs": true, "definitions": true,
}

var supported = map[string]bool{
	"type": true, "enum": true, "const": true, "properties": true, "required": true,
	"additionalProperties": true, "items": true, "prefixItems": true, "additionalItems": true,
	"minItems": true, "maxItems": true, "minLength": true, "maxLength": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"anyOf": true, "allOf": true, "$ref": true, "pattern": true,
}

func errAt(path, kw, format string, args ...any) error {
	return &SchemaError{Path: path, Keyword: kw, Msg: fmt.Sprintf(format, args...)}
}

// anyValue is any JSON value.
func (s *Schema) anyValue() Expr {
	if s.any == nil {
		s.any = NewRule("any json value")
		s.any.Define(jsonAny(s.any.Ref(), s.opt))
	}
	return s.any.Ref()
}

// compile returns the expression of the values of schema v (at path) of
// the kinds in want. raw generates strings as their contents (unquoted,
// unescaped text), for formats that carry strings as text.
func (s *Schema) compile(v *jvalue, path string, want kinds, raw bool) (Expr, error) {
	if v.kind == jBool {
		if !v.b {
			return Nothing(), nil
		}
		v = &jvalue{kind: jObject}
	}
	if v.kind != jObject {
		return nil, errAt(path, "", "a schema is an object or a boolean, not %s", v.kind)
	}
	var constraints []string
	for _, m := range v.members {
		switch {
		case annotations[m.key]:
		case supported[m.key]:
			constraints = append(constraints, m.key)
		default:
			return nil, errAt(path, m.key, "keyword not supported")
		}
	}
	if ref := v.get("$ref"); ref != nil {
		if len(constraints) > 1 {
			return nil, errAt(path, "$ref", "$ref together with %q is not supported", otherThan(constraints, "$ref"))
		}
		if ref.kind != jString {
			return nil, errAt(path, "$ref", "must be a string")
		}
		return s.ref(ref.str, path, want, raw)
	}
	if x := v.get("anyOf"); x != nil {
		if len(constraints) > 1 {
			return nil, errAt(path, "anyOf", "anyOf together with %q is not supported", otherThan(constraints, "anyOf"))
		}
		if x.kind != jArray || len(x.elems) == 0 {
			return nil, errAt(path, "anyOf", "must be a non-empty array of schemas")
		}
		alts := make([]Expr, len(x.elems))
		for i, e := range x.elems {
			var err error
			if alts[i], err = s.compile(e, fmt.Sprintf("%s/anyOf/%d", path, i), want, raw); err != nil {
				return nil, err
			}
		}
		return Alt(alts...), nil
	}
	if x := v.get("allOf"); x != nil {
		if x.kind != jArray || len(x.elems) != 1 {
			return nil, errAt(path, "allOf", "only allOf of one schema is supported")
		}
		if len(constraints) > 1 {
			return nil, errAt(path, "allOf", "allOf together with %q is not supported", otherThan(constraints, "allOf"))
		}
		return s.compile(x.elems[0], path+"/allOf/0", want, raw)
	}
	if v.get("enum") != nil || v.get("const") != nil {
		return s.enum(v, path, constraints, want, raw)
	}
	k := allKinds
	if t := v.get("type"); t != nil {
		var err error
		if k, err = typeKinds(t, path); err != nil {
			return nil, err
		}
	}
	k &= want
	var alts []Expr
	if k&kNull != 0 {
		alts = append(alts, Literal("null"))
	}
	if k&kBool != 0 {
		alts = append(alts, Literal("true"), Literal("false"))
	}
	if k&(kNumber|kInteger) != 0 {
		x, err := s.number(v, path, k&kNumber != 0)
		if err != nil {
			return nil, err
		}
		alts = append(alts, x)
	}
	if k&kString != 0 {
		x, err := s.str(v, path, raw)
		if err != nil {
			return nil, err
		}
		alts = append(alts, x)
	}
	if k&kArray != 0 {
		x, err := s.array(v, path)
		if err != nil {
			return nil, err
		}
		alts = append(alts, x)
	}
	if k&kObject != 0 {
		x, err := s.object(v, path)
		if err != nil {
			return nil, err
		}
		alts = append(alts, x)
	}
	return Alt(alts...), nil
}

func otherThan(list []string, kw string) string {
	for _, k := range list {
		if k != kw {
			return k
		}
	}
	return ""
}

func typeKinds(t *jvalue, path string) (kinds, error) {
	names := []*jvalue{t}
	if t.kind == jArray {
		names = t.elems
	}
	var k kinds
	for _, n := range names {
		if n.kind != jString {
			return 0, errAt(path, "type", "must be a type name or an array of them")
		}
		kk, ok := kindNames[n.str]
		if !ok {
			return 0, errAt(path, "type", "unknown type %q", n.str)
		}
		k |= kk
	}
	return k, nil
}

// ref resolves a reference within the document to a rule, so that
// recursive schemas become recursive grammars.
func (s *Schema) ref(ptr, path string, want kinds, raw bool) (Expr, error) {
	if !strings.HasPrefix(ptr, "#") {
		return nil, errAt(path, "$ref", "only references within the schema (\"#...\") are supported, not %q", ptr)
	}
	key := fmt.Sprintf("%s|%d|%v", ptr, want, raw)
	if r, ok := s.rules[key]; ok {
		return r.Ref(), nil
	}
	target, err := s.resolve(ptr, path)
	if err != nil {
		return nil, err
	}
	r := NewRule(ptr)
	s.rules[key] = r
	body, err := s.compile(target, ptr, want, raw)
	if err != nil {
		return nil, err
	}
	r.Define(body)
	return r.Ref(), nil
}

// resolve follows a JSON pointer ("#/$defs/node") from the root.
func (s *Schema) resolve(ptr, path string) (*jvalue, error) {
	v := s.root
	rest := strings.TrimPrefix(ptr, "#")
	if rest == "" {
		return v, nil
	}
	if !strings.HasPrefix(rest, "/") {
		return nil, errAt(path, "$ref", "%q is not a JSON pointer (anchors are not supported)", ptr)
	}
	for _, tok := range strings.Split(rest[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v.kind {
		case jObject:
			v = v.get(tok)
		case jArray:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v.elems) {
				v = nil
			} else {
				v = v.elems[i]
			}
		default:
			v = nil
		}
		if v == nil {
			return nil, errAt(path, "$ref", "%q points at nothing", ptr)
		}
	}
	return v, nil
}

// enum generates the values of enum (or const) that also satisfy the
// schema's other keywords, checked by the grammar of those keywords.
func (s *Schema) enum(v *jvalue, path string, constraints []string, want kinds, raw bool) (Expr, error) {
	var vals []*jvalue
	kw := "enum"
	if c := v.get("const"); c != nil {
		vals, kw = []*jvalue{c}, "const"
		if e := v.get("enum"); e != nil {
			return nil, errAt(path, "const", "const together with enum is not supported")
		}
	} else {
		e := v.get("enum")
		if e.kind != jArray {
			return nil, errAt(path, "enum", "must be an array")
		}
		vals = e.elems
	}
	var check *Grammar
	if len(constraints) > 1 {
		rest := &jvalue{kind: jObject}
		for _, m := range v.members {
			if m.key != "enum" && m.key != "const" {
				rest.members = append(rest.members, m)
			}
		}
		x, err := s.compile(rest, path, allKinds, false)
		if err != nil {
			return nil, err
		}
		check, err = Compile(x)
		if err != nil && !errors.Is(err, ErrEmpty) {
			return nil, errAt(path, kw, "checking the values against the other keywords: %v", err)
		}
	}
	var alts []Expr
	for _, val := range vals {
		text := val.text()
		if check != nil {
			if ok, _ := check.Recognize([]byte(text)); !ok {
				continue
			}
		}
		k := kindOf(val)
		if k&want == 0 {
			continue
		}
		if raw && val.kind == jString {
			alts = append(alts, Literal(val.str))
		} else {
			alts = append(alts, Literal(text))
		}
	}
	return Alt(alts...), nil
}

func kindOf(v *jvalue) kinds {
	switch v.kind {
	case jNull:
		return kNull
	case jBool:
		return kBool
	case jNumber:
		if v.isInteger() {
			return kInteger | kNumber
		}
		return kNumber
	case jString:
		return kString
	case jArray:
		return kArray
	}
	return kObject
}

// count reads a non-negative integer keyword (absent: def).
func count(v *jvalue, kw, path string, def int) (int, error) {
	x := v.get(kw)
	if x == nil {
		return def, nil
	}
	r, ok := x.rat()
	if !ok || !r.IsInt() || r.Sign() < 0 {
		return 0, errAt(path, kw, "must be a non-negative integer")
	}
	if !r.Num().IsInt64() || r.Num().Int64() > 1<<30 {
		return 1 << 30, nil
	}
	return int(r.Num().Int64()), nil
}

func (s *Schema) str(v *jvalue, path string, raw bool) (Expr, error) {
	lo, err := count(v, "minLength", path, 0)
	if err != nil {
		return nil, err
	}
	hi, err := count(v, "maxLength", path, -1)
	if err != nil {
		return nil, err
	}
	if lo > maxStringChars {
		return nil, errAt(path, "minLength", "%d characters is more than the %d this grammar compiler generates", lo, maxStringChars)
	}
	if hi > maxStringChars {
		hi = maxStringChars
	}
	if hi >= 0 && hi < lo {
		return Nothing(), nil
	}
	chars := Repeat(jsonChar(), lo, hi)
	if raw {
		chars = Repeat(UTF8Char(), lo, hi)
	}
	if p := v.get("pattern"); p != nil {
		if p.kind != jString {
			return nil, errAt(path, "pattern", "must be a string")
		}
		px, err := patternExpr(p.str, raw)
		if err != nil {
			return nil, errAt(path, "pattern", "%v", err)
		}
		if chars, err = Intersect(chars, px); err != nil {
			return nil, errAt(path, "pattern", "%v together with the length bounds: %v", p.str, err)
		}
	}
	if raw {
		return chars, nil
	}
	return Seq(Literal(`"`), chars, Literal(`"`)), nil
}

func (s *Schema) number(v *jvalue, path string, fractions bool) (Expr, error) {
	var lo, hi bound
	read := func(kw string) (*big.Rat, error) {
		x := v.get(kw)
		if x == nil {
			return nil, nil
		}
		r, ok := x.rat()
		if !ok {
			return nil, errAt(path, kw, "must be a number")
		}
		return r, nil
	}
	var err error
	if lo.v, err = read("minimum"); err != nil {
		return nil, err
	}
	if hi.v, err = read("maximum"); err != nil {
		return nil, err
	}
	// exclusiveMinimum is a number (2019 onwards) or, in draft 4, a
	// boolean that makes minimum exclusive.
	for _, e := range []struct {
		kw string
		b  *bound
		lo bool
	}{{"exclusiveMinimum", &lo, true}, {"exclusiveMaximum", &hi, false}} {
		x := v.get(e.kw)
		switch {
		case x == nil:
		case x.kind == jBool:
			if x.b {
				if e.b.v == nil {
					return nil, errAt(path, e.kw, "true needs %s", map[bool]string{true: "minimum", false: "maximum"}[e.lo])
				}
				e.b.excl = true
			}
		default:
			r, ok := x.rat()
			if !ok {
				return nil, errAt(path, e.kw, "must be a number")
			}
			// The tighter of the two bounds wins.
			if c := cmpRat(r, e.b.v); e.b.v == nil || (e.lo && c >= 0) || (!e.lo && c <= 0) {
				*e.b = bound{r, true}
			}
		}
	}
	if !fractions {
		a, b := integerBounds(lo, hi)
		if a == nil && b == nil {
			return jsonInt(), nil
		}
		return integerRange(a, b), nil
	}
	if lo.v == nil && hi.v == nil {
		return JSONNumber(), nil
	}
	x, err := decimalRange(lo, hi)
	if err != nil {
		return nil, errAt(path, "minimum", "%v", err)
	}
	return x, nil
}

func cmpRat(a, b *big.Rat) int {
	if b == nil {
		return 0
	}
	return a.Cmp(b)
}

// itemRule wraps an item expression in a rule, so that an array unrolled
// many times calls one copy of a large item instead of repeating it.
func itemRule(x Expr, path string) Expr {
	r := NewRule(path)
	r.Define(x)
	return r.Ref()
}

func (s *Schema) array(v *jvalue, path string) (Expr, error) {
	lo, err := count(v, "minItems", path, 0)
	if err != nil {
		return nil, err
	}
	hi, err := count(v, "maxItems", path, -1)
	if err != nil {
		return nil, err
	}
	if lo > maxArrayItems {
		return nil, errAt(path, "minItems", "%d items is more than the %d this grammar compiler generates", lo, maxArrayItems)
	}
	if hi > maxArrayItems {
		hi = maxArrayItems
	}
	var prefix []Expr
	var rest Expr = s.anyValue()
	restPath := path + "/items"
	items := v.get("items")
	if p := v.get("prefixItems"); p != nil {
		if p.kind != jArray {
			return nil, errAt(path, "prefixItems", "must be an array of schemas")
		}
		for i, e := range p.elems {
			x, err := s.compile(e, fmt.Sprintf("%s/prefixItems/%d", path, i), allKinds, false)
			if err != nil {
				return nil, err
			}
			prefix = append(prefix, x)
		}
	} else if items != nil && items.kind == jArray {
		// Draft 4 to 2019-09: items as an array is the prefix, and
		// additionalItems the rest.
		for i, e := range items.elems {
			x, err := s.compile(e, fmt.Sprintf("%s/items/%d", path, i), allKinds, false)
			if err != nil {
				return nil, err
			}
			prefix = append(prefix, x)
		}
		items = v.get("additionalItems")
		restPath = path + "/additionalItems"
	} else if v.get("additionalItems") != nil {
		return nil, errAt(path, "additionalItems", "needs items to be an array")
	}
	if items != nil {
		x, err := s.compile(items, restPath, allKinds, false)
		if err != nil {
			return nil, err
		}
		rest = x
	}
	if isNothing(rest) {
		rest = nil
	} else {
		rest = itemRule(rest, restPath)
	}
	return jsonTuple(prefix, rest, lo, hi, s.opt), nil
}

// objectMember is one declared property: its key and value.
type objectMember struct {
	name     string
	required bool
	value    Expr
}

func (s *Schema) object(v *jvalue, path string) (Expr, error) {
	members, extra, err := s.members(v, path)
	if err != nil {
		return nil, err
	}
	ws := s.opt.ws()
	var names []string
	var parts []Expr
	var required []bool
	for _, m := range members {
		names = append(names, m.name)
		var key strings.Builder
		writeJSONString(&key, m.name)
		parts = append(parts, Seq(Literal(key.String()), ws, Literal(":"), ws, m.value, ws))
		required = append(required, m.required)
	}
	var extraMember Expr
	if extra != nil {
		key, err := extraKey(names)
		if err != nil {
			return nil, errAt(path, "additionalProperties", "%v", err)
		}
		extraMember = Seq(key, ws, Literal(":"), ws, extra, ws)
	}
	return Seq(Literal("{"), ws, separated(parts, required, extraMember, Seq(Literal(","), ws)), Literal("}")), nil
}

// separated matches parts in order, each left out when not required,
// then any number of extra (nil: none), with sep between those present.
func separated(parts []Expr, required []bool, extra, sep Expr) Expr {
	// Node 2i+e: before part i, e = 1 when something came already.
	k := len(parts)
	n := netExpr{nodes: 2*k + 2, final: make([]bool, 2*k+2)}
	id := func(i, e int) int { return 2*i + e }
	for i, p := range parts {
		n.edges = append(n.edges, netEdge{id(i, 0), id(i+1, 1), p}, netEdge{id(i, 1), id(i+1, 1), Seq(sep, p)})
		if !required[i] {
			n.edges = append(n.edges, netEdge{id(i, 0), id(i+1, 0), Empty()}, netEdge{id(i, 1), id(i+1, 1), Empty()})
		}
	}
	if extra != nil {
		n.edges = append(n.edges, netEdge{id(k, 0), id(k, 1), extra}, netEdge{id(k, 1), id(k, 1), Seq(sep, extra)})
	}
	n.final[id(k, 0)], n.final[id(k, 1)] = true, true
	return n
}

// extraKey is a JSON string that is none of names, written without
// escapes (so that no escaped spelling of a declared name slips through).
func extraKey(names []string) (Expr, error) {
	ctl := make([]byte, 0, 34)
	for b := range 0x20 {
		ctl = append(ctl, byte(b))
	}
	ctl = append(ctl, '"', '\\')
	content := Star(utf8Except(ctl))
	if len(names) > 0 {
		lits := make([]Expr, len(names))
		for i, n := range names {
			lits[i] = Literal(n)
		}
		var err error
		if content, err = Minus(content, Alt(lits...)); err != nil {
			return nil, err
		}
	}
	return Seq(Literal(`"`), content, Literal(`"`)), nil
}

// members reads the declared properties of an object schema, in order,
// and the schema of the others (nil: none allowed).
func (s *Schema) members(v *jvalue, path string) ([]objectMember, Expr, error) {
	req := map[string]bool{}
	var reqOrder []string
	if r := v.get("required"); r != nil {
		if r.kind != jArray {
			return nil, nil, errAt(path, "required", "must be an array of property names")
		}
		for _, e := range r.elems {
			if e.kind != jString {
				return nil, nil, errAt(path, "required", "must be an array of property names")
			}
			if !req[e.str] {
				reqOrder = append(reqOrder, e.str)
			}
			req[e.str] = true
		}
	}
	var out []objectMember
	declared := map[string]bool{}
	props := v.get("properties")
	if props != nil {
		if props.kind != jObject {
			return nil, nil, errAt(path, "properties", "must be an object of schemas")
		}
		for _, m := range props.members {
			if declared[m.key] {
				return nil, nil, errAt(path, "properties", "property %q is declared twice", m.key)
			}
			declared[m.key] = true
			x, err := s.compile(m.val, path+"/properties/"+pointerEscape(m.key), allKinds, false)
			if err != nil {
				return nil, nil, err
			}
			if isNothing(x) {
				if req[m.key] {
					return nil, nil, errAt(path+"/properties/"+pointerEscape(m.key), "", "required property %q admits no value", m.key)
				}
				continue
			}
			out = append(out, objectMember{m.key, req[m.key], x})
		}
	}
	var extra Expr
	ap := v.get("additionalProperties")
	switch {
	case ap == nil:
		// Absent means any other property is valid. Generating them is
		// only useful when no property is declared (a free-form object);
		// otherwise the declared ones are what the schema is about.
		if props == nil || len(props.members) == 0 {
			extra = s.anyValue()
		}
	case ap.kind == jBool && !ap.b:
	default:
		x, err := s.compile(ap, path+"/additionalProperties", allKinds, false)
		if err != nil {
			return nil, nil, err
		}
		if !isNothing(x) {
			extra = x
		}
	}
	for _, name := range reqOrder {
		if declared[name] {
			continue
		}
		val := s.anyValue()
		if ap != nil {
			if extra == nil {
				return nil, nil, errAt(path, "required", "property %q is required but additionalProperties forbids it", name)
			}
			val = extra
		}
		out = append(out, objectMember{name, true, val})
		declared[name] = true
	}
	return out, extra, nil
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// Property is one declared property of an object schema, as Properties
// returns it, for formats that carry arguments as separate named values
// rather than one JSON object.
type Property struct {
	Name     string
	Required bool
	// Text is the property's string values as raw text (the string's
	// characters, unquoted and unescaped); Nothing when it admits none.
	Text Expr
	// NonString is its other values, as JSON; Nothing when it admits none.
	NonString Expr
}

// Properties returns the declared properties of the schema, which must be
// an object schema (type "object", properties, required; additional
// properties are not generated).
func (s *Schema) Properties() ([]Property, error) {
	v, path := s.root, "#"
	for v.kind == jObject && v.get("$ref") != nil && len(v.members) == 1 {
		ref := v.get("$ref")
		if ref.kind != jString {
			return nil, errAt(path, "$ref", "must be a string")
		}
		var err error
		if v, err = s.resolve(ref.str, path); err != nil {
			return nil, err
		}
		path = ref.str
	}
	if v.kind == jBool && v.b {
		return nil, nil
	}
	if v.kind != jObject {
		return nil, errAt(path, "", "not an object schema")
	}
	for _, m := range v.members {
		if !annotations[m.key] && !slices.Contains([]string{"type", "properties", "required", "additionalProperties"}, m.key) {
			return nil, errAt(path, m.key, "keyword not supported on the arguments object of a tool")
		}
	}
	if t := v.get("type"); t != nil {
		k, err := typeKinds(t, path)
		if err != nil {
			return nil, err
		}
		if k&kObject == 0 {
			return nil, errAt(path, "type", "the arguments of a tool must be an object")
		}
	}
	req := map[string]bool{}
	if r := v.get("required"); r != nil {
		for _, e := range r.elems {
			req[e.str] = true
		}
	}
	var out []Property
	if props := v.get("properties"); props != nil {
		if props.kind != jObject {
			return nil, errAt(path, "properties", "must be an object of schemas")
		}
		for _, m := range props.members {
			p := path + "/properties/" + pointerEscape(m.key)
			text, err := s.compile(m.val, p, kString, true)
			if err != nil {
				return nil, err
			}
			other, err := s.compile(m.val, p, allKinds&^kString, false)
			if err != nil {
				return nil, err
			}
			if isNothing(text) && isNothing(other) {
				if req[m.key] {
					return nil, errAt(p, "", "required property %q admits no value", m.key)
				}
				continue
			}
			out = append(out, Property{Name: m.key, Required: req[m.key], Text: text, NonString: other})
			delete(req, m.key)
		}
	}
	for name := range req {
		return nil, errAt(path, "required", "required property %q is not declared in properties", name)
	}
	return out, nil
}

// Separated matches parts in order, each left out when not required, with
// sep between those present: the members of an object, or named
// arguments.
func Separated(parts []Expr, required []bool, sep Expr) Expr {
	return separated(parts, required, nil, sep)
}
