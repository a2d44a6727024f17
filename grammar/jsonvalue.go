package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"strings"
)

// jvalue is a decoded JSON value that keeps the order of object members
// (a schema's properties are generated in the order it declares them) and
// the exact text of numbers.
type jvalue struct {
	kind    jkind
	str     string // string; number (its text)
	b       bool
	members []jmember
	elems   []*jvalue
}

type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

type jmember struct {
	key string
	val *jvalue
}

func (k jkind) String() string {
	return [...]string{"null", "boolean", "number", "string", "array", "object"}[k]
}

// get returns the member named key, or nil.
func (v *jvalue) get(key string) *jvalue {
	for _, m := range v.members {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

// parseJSON decodes exactly one JSON value.
func parseJSON(data []byte) (*jvalue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

const maxJSONDepth = 512

func decodeValue(dec *json.Decoder, depth int) (*jvalue, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("nested more than %d deep", maxJSONDepth)
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case nil:
		return &jvalue{kind: jNull}, nil
	case bool:
		return &jvalue{kind: jBool, b: t}, nil
	case json.Number:
		return &jvalue{kind: jNumber, str: string(t)}, nil
	case string:
		return &jvalue{kind: jString, str: t}, nil
	case json.Delim:
		switch t {
		case '[':
			v := &jvalue{kind: jArray}
			for dec.More() {
				e, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.elems = append(v.elems, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return v, nil
		case '{':
			v := &jvalue{kind: jObject}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				e, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				// Readers disagree on which of two equal keys counts.
				if v.get(kt.(string)) != nil {
					return nil, fmt.Errorf("key %q appears twice in one object", kt)
				}
				v.members = append(v.members, jmember{kt.(string), e})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return v, nil
		}
	}
	return nil, fmt.Errorf("unexpected JSON token %v", t)
}

// compact writes v as compact JSON: members in order, strings with only
// the escapes JSON requires, numbers as written.
func (v *jvalue) compact(b *strings.Builder) {
	switch v.kind {
	case jNull:
		b.WriteString("null")
	case jBool:
		if v.b {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case jNumber:
		b.WriteString(v.str)
	case jString:
		writeJSONString(b, v.str)
	case jArray:
		b.WriteByte('[')
		for i, e := range v.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			e.compact(b)
		}
		b.WriteByte(']')
	case jObject:
		b.WriteByte('{')
		for i, m := range v.members {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, m.key)
			b.WriteByte(':')
			m.val.compact(b)
		}
		b.WriteByte('}')
	}
}

func (v *jvalue) text() string {
	var b strings.Builder
	v.compact(&b)
	return b.String()
}

// writeJSONString writes s as a JSON string, escaping only '"', '\\' and
// control characters (invalid UTF-8 becomes U+FFFD, as the JSON decoder
// reads it).
func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// rat is a JSON number's exact value.
func (v *jvalue) rat() (*big.Rat, bool) {
	if v.kind != jNumber {
		return nil, false
	}
	// A huge exponent would make SetString build a huge integer.
	if i := strings.IndexAny(v.str, "eE"); i >= 0 {
		e := strings.TrimLeft(v.str[i+1:], "+-")
		if len(strings.TrimLeft(e, "0")) > 3 {
			return nil, false
		}
	}
	r, ok := new(big.Rat).SetString(v.str)
	return r, ok
}

// isInteger reports whether v is a number with an integral value.
func (v *jvalue) isInteger() bool {
	r, ok := v.rat()
	return ok && r.IsInt()
}
