package chat

import (
	"encoding/json"
	"testing"
)

// The expected strings are what CPython 3 prints for json.dumps(json.loads(in),
// ensure_ascii=False); float cases follow repr's documented rules (shortest
// round-trip digits; exponent form when the exponent is < -4 or >= 16).
func TestPyJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":1,"b":[true,false,null],"c":{}}`, `{"a": 1, "b": [true, false, null], "c": {}}`},
		{`{"b":1,"a":2,"b":3}`, `{"b": 3, "a": 2}`}, // duplicates: first place, last value
		{`[]`, `[]`},
		{`"<&>/'"`, `"<&>/'"`},
		{`"\u00e9\u4e16\ud83d\ude00"`, `"é世😀"`},
		{`"\u2028\u007f"`, "\"\u2028\u007f\""},
		{`"\"\\\n\r\t\b\f\u0001\u001f"`, `"\"\\\n\r\t\b\f\u0001\u001f"`},
		{`-0`, `0`},
		{`123456789012345678901234567890`, `123456789012345678901234567890`},
		{`1.0`, `1.0`},
		{`-2.50`, `-2.5`},
		{`0.1`, `0.1`},
		{`1e2`, `100.0`},
		{`1e15`, `1000000000000000.0`},
		{`1e16`, `1e+16`},
		{`1.5e300`, `1.5e+300`},
		{`0.0001`, `0.0001`},
		{`0.00001`, `1e-05`},
		{`1.25e-7`, `1.25e-07`},
		{`123456789.123`, `123456789.123`},
		{`0.30000000000000004`, `0.30000000000000004`},
		{`5e-324`, `5e-324`},
		{`1.7976931348623157e308`, `1.7976931348623157e+308`},
		{`1e400`, `Infinity`},
		{`-1e400`, `-Infinity`},
		{`1e-400`, `0.0`},
		{`-0.0`, `-0.0`},
	} {
		v, err := parseJSON([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got := pyJSON(v); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":1}x`, `{"a":1} {}`, `NaN`, `[1,]`} {
		if _, err := parseJSON([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestToolFunctionRendering(t *testing.T) {
	var tools []Tool
	src := `[{"type":"function","function":{"strict":true,"parameters":{"type":"object"},"name":"f","description":"d"}}]`
	if err := json.Unmarshal([]byte(src), &tools); err != nil {
		t.Fatal(err)
	}
	obj, err := tools[0].Function.object()
	if err != nil {
		t.Fatal(err)
	}
	// Decoded: the object as sent, key order and extra keys kept.
	if got, want := pyJSON(obj), `{"strict": true, "parameters": {"type": "object"}, "name": "f", "description": "d"}`; got != want {
		t.Errorf("decoded: got %s, want %s", got, want)
	}
	// Changed after decoding: rendered from the fields.
	tools[0].Function.Description = "changed"
	obj, _ = tools[0].Function.object()
	if got, want := pyJSON(obj), `{"name": "f", "description": "changed", "parameters": {"type": "object"}}`; got != want {
		t.Errorf("changed: got %s, want %s", got, want)
	}
	// Built in code, without description or parameters.
	obj, _ = (&ToolFunction{Name: "g"}).object()
	if got, want := pyJSON(obj), `{"name": "g"}`; got != want {
		t.Errorf("built: got %s, want %s", got, want)
	}
}

func TestToolCallJSON(t *testing.T) {
	var calls []ToolCall
	src := `[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}},
	         {"id":"c2","type":"function","function":{"name":"g","arguments":{"b":2}}},
	         {"type":"function","function":{"name":"h"}}]`
	if err := json.Unmarshal([]byte(src), &calls); err != nil {
		t.Fatal(err)
	}
	want := []ToolCall{{ID: "c1", Name: "f", Arguments: `{"a": 1}`}, {ID: "c2", Name: "g", Arguments: `{"b":2}`}, {Name: "h"}}
	for i := range want {
		if calls[i] != want[i] {
			t.Errorf("call %d: got %+v, want %+v", i, calls[i], want[i])
		}
	}
	out, err := json.Marshal(calls[0])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), `{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}`; got != want {
		t.Errorf("marshal: got %s, want %s", got, want)
	}
}
