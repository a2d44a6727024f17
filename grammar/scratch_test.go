package grammar

import "testing"

func TestScratch(t *testing.T) {
	for _, c := range []struct{ schema, doc string }{
		{`{"type":"integer","minimum":-5,"maximum":120}`, `-5`},
		{`{"type":"integer","minimum":-5,"maximum":120}`, `121`},
		{`{"type":"integer","minimum":-5,"maximum":120}`, `99`},
		{`{"type":"number","minimum":0.5,"maximum":2.25}`, `2.25`},
		{`{"type":"number","minimum":0.5,"maximum":2.25}`, `2.26`},
		{`{"type":"number","minimum":0.5,"maximum":2.25}`, `0.4999`},
		{`{"type":"number","minimum":0.5,"maximum":2.25}`, `0.5`},
		{`{"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"type":"boolean"}},"required":["b"]}`, `{"a":"xyz","b":true}`},
		{`{"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"type":"boolean"}},"required":["b"]}`, `{"b":true}`},
		{`{"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"type":"boolean"}},"required":["b"]}`, `{"a":"x"}`},
		{`{}`, `{"a":[1,2,{"b":null}],"c":"\ud83d\ude00"}`},
		{`{"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"}`, `{"c":[{"c":[]},{}]}`},
	} {
		g, err := CompileSchema([]byte(c.schema), Options{})
		if err != nil {
			t.Fatal(err)
		}
		ok, pre := g.Recognize([]byte(c.doc))
		t.Logf("%s %s: %v %v (nodes %d)", c.schema, c.doc, ok, pre, g.Nodes())
	}
}
