package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// jsonKind is the type of a jsonValue.
type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

// jsonValue is a decoded JSON value that keeps object keys in document order,
// as Python's json.loads does (dicts preserve insertion order). Prompts embed
// re-serialized JSON, so the order must survive the round trip.
type jsonValue struct {
	kind    jsonKind
	b       bool         // jsonBool
	s       string       // jsonString: the value; jsonNumber: the literal
	items   []jsonValue  // jsonArray
	members []jsonMember // jsonObject, in first-occurrence order
}

type jsonMember struct {
	key string
	val jsonValue
}

// parseJSON decodes exactly one JSON value from data. Duplicate object keys
// keep the position of their first occurrence and the value of their last,
// like Python's json.loads.
func parseJSON(data []byte) (jsonValue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJSONValue(dec)
	if err != nil {
		return jsonValue{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("unexpected data after the JSON value")
		}
		return jsonValue{}, err
	}
	return v, nil
}

func decodeJSONValue(dec *json.Decoder) (jsonValue, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return jsonValue{}, err
	}
	switch t := tok.(type) {
	case nil:
		return jsonValue{kind: jsonNull}, nil
	case bool:
		return jsonValue{kind: jsonBool, b: t}, nil
	case json.Number:
		return jsonValue{kind: jsonNumber, s: string(t)}, nil
	case string:
		return jsonValue{kind: jsonString, s: t}, nil
	case json.Delim:
		switch t {
		case '[':
			v := jsonValue{kind: jsonArray}
			for dec.More() {
				item, err := decodeJSONValue(dec)
				if err != nil {
					return jsonValue{}, err
				}
				v.items = append(v.items, item)
			}
			_, err := dec.Token() // ']'
			return v, err
		case '{':
			v := jsonValue{kind: jsonObject}
			index := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jsonValue{}, err
				}
				key, _ := kt.(string) // the decoder only yields string keys
				val, err := decodeJSONValue(dec)
				if err != nil {
					return jsonValue{}, err
				}
				if i, dup := index[key]; dup {
					v.members[i].val = val
					continue
				}
				index[key] = len(v.members)
				v.members = append(v.members, jsonMember{key, val})
			}
			_, err := dec.Token() // '}'
			return v, err
		}
	}
	return jsonValue{}, fmt.Errorf("unexpected JSON token %v", tok)
}

// pyJSON returns v serialized the way Python's json.dumps(v,
// ensure_ascii=False) does with its default separators ", " and ": ".
func pyJSON(v jsonValue) string {
	var b strings.Builder
	writePyJSON(&b, v)
	return b.String()
}

func writePyJSON(b *strings.Builder, v jsonValue) {
	switch v.kind {
	case jsonNull:
		b.WriteString("null")
	case jsonBool:
		if v.b {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case jsonNumber:
		b.WriteString(pyNumber(v.s))
	case jsonString:
		writePyString(b, v.s)
	case jsonArray:
		b.WriteByte('[')
		for i, item := range v.items {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyJSON(b, item)
		}
		b.WriteByte(']')
	case jsonObject:
		b.WriteByte('{')
		for i, m := range v.members {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyString(b, m.key)
			b.WriteString(": ")
			writePyJSON(b, m.val)
		}
		b.WriteByte('}')
	}
}

// pyString returns s as Python's json.dumps(s, ensure_ascii=False) writes it.
func pyString(s string) string {
	var b strings.Builder
	writePyString(&b, s)
	return b.String()
}

// writePyString quotes s like Python's json encoder with ensure_ascii=False:
// only '"', '\\' and the C0 control characters are escaped; everything else,
// including '<', '&', U+007F and U+2028, is written as is.
func writePyString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b.WriteString(s[start:i])
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		}
		start = i + 1
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

// pyNumber re-serializes a JSON number literal as Python does after
// json.loads: literals with a fraction or exponent become floats (printed
// with repr), others become ints (printed exactly, "-0" as "0").
func pyNumber(lit string) string {
	if !strings.ContainsAny(lit, ".eE") {
		if strings.TrimLeft(lit, "-0") == "" {
			return "0"
		}
		return lit
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return lit // unreachable for literals accepted by the decoder
	}
	return pyFloatRepr(f)
}

// pyFloatRepr formats f as Python's repr(float) (and so json.dumps) does:
// the shortest round-tripping digits, in positional notation when the
// decimal exponent lies in [-4, 16), otherwise in exponent notation with at
// least two exponent digits; positional values always carry a fraction.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // [-]d[.ddd]e±dd
	sign := ""
	if e[0] == '-' {
		sign, e = "-", e[1:]
	}
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	decpt := x + 1 // value = 0.digits × 10^decpt
	n := len(digits)
	var out string
	switch {
	case decpt <= -4 || decpt > 16:
		out = digits[:1]
		if n > 1 {
			out += "." + digits[1:]
		}
		es := "+"
		if x < 0 {
			es, x = "-", -x
		}
		xs := strconv.Itoa(x)
		if len(xs) < 2 {
			xs = "0" + xs
		}
		out += "e" + es + xs
	case decpt <= 0:
		out = "0." + strings.Repeat("0", -decpt) + digits
	case decpt >= n:
		out = digits + strings.Repeat("0", decpt-n) + ".0"
	default:
		out = digits[:decpt] + "." + digits[decpt:]
	}
	return sign + out
}
