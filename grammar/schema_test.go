package grammar

import (
	"errors"
	"strings"
	"testing"
)

// TestSchemaKeywords: per keyword, documents the compiled grammar must
// accept (each also valid under an independent validator, so the table
// itself is checked) and documents it must reject.
func TestSchemaKeywords(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		accept       []string
		reject       []string
		invalid      []string // rejected and invalid under the schema
	}{
		{"type string", `{"type":"string"}`, []string{`""`, `"abc"`, `"a\"b\\c\/\n\t\u00e9"`, `"\ud83d\ude00"`, `"日本語"`},
			[]string{`"\ud83d"`}, []string{`1`, `null`, `"a` + "\x01" + `"`, `"\x"`}},
		{"type integer", `{"type":"integer"}`, []string{`0`, `-7`, `12345678901234567890`}, []string{`1.0`, `01`}, []string{`1.5`, `"1"`, `true`}},
		{"type number", `{"type":"number"}`, []string{`0`, `-1.5`, `3e10`, `2.5E-3`, `1.25e+2`}, []string{`.5`, `1.`, `+1`}, []string{`"1"`, `null`}},
		{"type boolean", `{"type":"boolean"}`, []string{`true`, `false`}, nil, []string{`0`, `"true"`}},
		{"type null", `{"type":"null"}`, []string{`null`}, nil, []string{`0`, `{}`}},
		{"type array of types", `{"type":["string","null"]}`, []string{`"x"`, `null`}, nil, []string{`1`, `[]`}},
		{"properties and required", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]}`,
			[]string{`{"a":1}`, `{"a":1,"b":"x"}`}, []string{`{"b":"x","a":1}`}, []string{`{}`, `{"b":"x"}`, `{"a":"1"}`}},
		{"additionalProperties false", `{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false}`,
			[]string{`{}`, `{"a":2}`}, nil, []string{`{"a":2,"b":3}`, `{"c":null}`}},
		{"additionalProperties schema", `{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"boolean"}}`,
			[]string{`{"a":1,"x":true}`, `{"y":false,"z":true}`}, []string{`{"a":1,"a":2}`}, []string{`{"x":1}`, `{"a":true}`}},
		{"additionalProperties true", `{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":true}`,
			[]string{`{"a":1,"x":[1,{"y":null}]}`}, nil, []string{`{"a":"s"}`}},
		{"free object", `{"type":"object"}`, []string{`{}`, `{"k":{"n":[1,2.5,"s",null,true]}}`}, nil, []string{`[]`, `"o"`}},
		{"enum", `{"enum":["red",2,null,{"a":[1]}]}`, []string{`"red"`, `2`, `null`, `{"a":[1]}`}, nil, []string{`"blue"`, `3`, `{"a":[2]}`}},
		{"enum with type", `{"type":"string","enum":["a",1,"b"]}`, []string{`"a"`, `"b"`}, nil, []string{`1`, `"c"`}},
		{"const", `{"const":"fixed"}`, []string{`"fixed"`}, nil, []string{`"other"`, `null`}},
		{"items", `{"type":"array","items":{"type":"integer"}}`, []string{`[]`, `[1]`, `[1,2,3]`}, nil, []string{`[1,"a"]`, `[1.5]`}},
		{"minItems maxItems", `{"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":2}`, []string{`[true]`, `[true,false]`}, nil, []string{`[]`, `[true,true,true]`}},
		{"prefixItems", `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}`, []string{`[]`, `["a"]`, `["a",1]`}, nil, []string{`["a",1,2]`, `[1]`}},
		{"minLength maxLength", `{"type":"string","minLength":2,"maxLength":3}`, []string{`"ab"`, `"abc"`, `"é\n"`, `"\ud83d\ude00x"`}, nil, []string{`"a"`, `"abcd"`}},
		{"integer minimum maximum", `{"type":"integer","minimum":-12,"maximum":305}`, []string{`-12`, `-1`, `0`, `9`, `10`, `99`, `100`, `299`, `305`}, nil, []string{`-13`, `306`, `1000`, `-100`}},
		{"integer exclusive bounds", `{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10}`, []string{`1`, `9`}, nil, []string{`0`, `10`}},
		{"integer fractional bounds", `{"type":"integer","minimum":1.5,"maximum":3.5}`, []string{`2`, `3`}, nil, []string{`1`, `4`}},
		{"number minimum maximum", `{"type":"number","minimum":-1.25,"maximum":2.5}`, []string{`-1.25`, `-1.2`, `0`, `0.001`, `2.5`, `2.49999`, `2.50`, `-0.5`}, []string{`2.5e0`}, []string{`-1.26`, `2.51`, `3`, `-2`}},
		{"number exclusive", `{"type":"number","exclusiveMinimum":0.5,"exclusiveMaximum":0.75}`, []string{`0.6`, `0.51`, `0.7499`}, []string{`0.5000001e0`}, []string{`0.5`, `0.75`, `0.50`, `1`}},
		{"anyOf", `{"anyOf":[{"type":"integer","maximum":3},{"type":"string","maxLength":1}]}`, []string{`3`, `-4`, `"x"`}, nil, []string{`4`, `"xy"`, `null`}},
		{"$ref and $defs", `{"$defs":{"pos":{"type":"integer","minimum":1}},"type":"object","properties":{"n":{"$ref":"#/$defs/pos"}},"required":["n"],"additionalProperties":false}`,
			[]string{`{"n":1}`, `{"n":99}`}, nil, []string{`{"n":0}`, `{}`}},
		{"recursive $ref", `{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}}},"additionalProperties":false}`,
			[]string{`{}`, `{"kids":[]}`, `{"kids":[{},{"kids":[{}]}]}`}, nil, []string{`{"kids":[1]}`, `{"kids":[{"x":1}]}`}},
		{"definitions", `{"definitions":{"b":{"type":"boolean"}},"type":"array","items":{"$ref":"#/definitions/b"}}`, []string{`[true,false]`}, nil, []string{`[1]`}},
		{"true schema", `true`, []string{`1`, `"s"`, `{"a":[]}`}, nil, nil},
		{"annotations", `{"title":"T","description":"D","type":"string","format":"date-time","default":"x","examples":["y"]}`, []string{`"anything"`}, nil, []string{`1`}},
		{"pattern anchored", `{"type":"string","pattern":"^[A-Z][a-z]{1,3}-\\d+$"}`, []string{`"Ab-1"`, `"Zzzz-042"`}, nil, []string{`"ab-1"`, `"Ab-"`, `"Abcde-1"`, `"xAb-1"`}},
		{"pattern unanchored", `{"type":"string","pattern":"o\"k"}`, []string{`"o\"k"`, `"xo\"ky"`}, []string{`"o\u0022k"`}, []string{`"ok"`}},
		{"pattern with length", `{"type":"string","pattern":"^(?i)ab+$","maxLength":3}`, []string{`"ab"`, `"AbB"`}, nil, []string{`"abbb"`, `"ac"`}},
		{"pattern unicode", `{"type":"string","pattern":"^[α-ω]+\\.$"}`, []string{`"λογ."`}, nil, []string{`"abc."`}},
		{"allOf of one", `{"allOf":[{"type":"integer","maximum":0}]}`, []string{`0`, `-3`}, nil, []string{`1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := CompileSchema([]byte(tc.schema), Options{})
			if err != nil {
				t.Fatal(err)
			}
			val := validator(t, tc.schema)
			for _, doc := range tc.accept {
				if msg := validate(val, doc); msg != "" {
					t.Errorf("test table: %s is not valid: %s", doc, msg)
				}
				if ok, _ := g.Recognize([]byte(doc)); !ok {
					t.Errorf("%s rejected", doc)
				}
			}
			for _, doc := range tc.reject {
				if ok, _ := g.Recognize([]byte(doc)); ok {
					t.Errorf("%s accepted (valid, but outside what the grammar generates)", doc)
				}
			}
			for _, doc := range tc.invalid {
				if msg := validate(val, doc); msg == "" {
					t.Errorf("test table: %s is valid", doc)
				}
				if ok, _ := g.Recognize([]byte(doc)); ok {
					t.Errorf("invalid %s accepted", doc)
				}
			}
		})
	}
}

// TestSchemaWhitespace: the whitespace bound holds at every place JSON
// allows whitespace, and compact is the default.
func TestSchemaWhitespace(t *testing.T) {
	schema := `{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}}}`
	compact, err := CompileSchema([]byte(schema), Options{})
	if err != nil {
		t.Fatal(err)
	}
	loose, err := CompileSchema([]byte(schema), Options{Whitespace: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		doc            string
		compact, loose bool
	}{
		{`{"a":[1,2]}`, true, true},
		{` { "a" : [ 1 , 2 ] } `, false, true},
		{"{\n  \"a\": [1,\n\t2]\n}", false, true},
		{`{"a":    [1]}`, false, false},
	} {
		if ok, _ := compact.Recognize([]byte(tc.doc)); ok != tc.compact {
			t.Errorf("compact: %q accepted %v, want %v", tc.doc, ok, tc.compact)
		}
		if ok, _ := loose.Recognize([]byte(tc.doc)); ok != tc.loose {
			t.Errorf("whitespace 3: %q accepted %v, want %v", tc.doc, ok, tc.loose)
		}
	}
}

// TestSchemaErrors: what the compiler refuses names the keyword and where.
func TestSchemaErrors(t *testing.T) {
	for _, tc := range []struct {
		schema, keyword, path string
		unsupported           bool
	}{
		{`{"type":"string","pattern":"\\bword"}`, "pattern", "#", true},
		{`{"type":"string","pattern":"a(?=b)"}`, "pattern", "#", true},
		{`{"properties":{"x":{"type":"array","uniqueItems":true}}}`, "uniqueItems", "#/properties/x", true},
		{`{"oneOf":[{"type":"string"}]}`, "oneOf", "#", true},
		{`{"not":{}}`, "not", "#", true},
		{`{"type":"object","minProperties":1}`, "minProperties", "#", true},
		{`{"type":"number","multipleOf":2}`, "multipleOf", "#", true},
		{`{"$ref":"http://example.com/s.json"}`, "$ref", "#", false},
		{`{"$ref":"#/$defs/missing"}`, "$ref", "#", false},
		{`{"type":"strin"}`, "type", "#", false},
		{`{"type":"string","minLength":-1}`, "minLength", "#", false},
		{`{"anyOf":[{"type":"string"}],"type":"string"}`, "anyOf", "#", true},
		{`{"type":"string","minLength":100000}`, "minLength", "#", false},
	} {
		_, err := CompileSchema([]byte(tc.schema), Options{})
		var se *SchemaError
		if !errors.As(err, &se) {
			t.Errorf("%s: got %v, want a SchemaError", tc.schema, err)
			continue
		}
		if se.Keyword != tc.keyword || se.Path != tc.path || !strings.Contains(err.Error(), tc.keyword) {
			t.Errorf("%s: error %q names keyword %q at %q, want %q at %q", tc.schema, err, se.Keyword, se.Path, tc.keyword, tc.path)
		}
		if errors.Is(err, ErrUnsupported) != tc.unsupported {
			t.Errorf("%s: %v: unsupported %v, want %v", tc.schema, err, !tc.unsupported, tc.unsupported)
		}
	}
	for _, schema := range []string{`{"type":"integer","minimum":5,"maximum":4}`, `{"enum":[]}`, `false`, `{"type":"object","properties":{"a":false},"required":["a"]}`} {
		if _, err := CompileSchema([]byte(schema), Options{}); err == nil {
			t.Errorf("%s: compiled, but no value satisfies it", schema)
		}
	}
	for _, schema := range []string{`{`, `[]`, `{"type":1}`} {
		if _, err := CompileSchema([]byte(schema), Options{}); err == nil {
			t.Errorf("%s: compiled", schema)
		}
	}
}
