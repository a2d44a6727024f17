package safetensors

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var allDTypes = []DType{Bool, U8, I8, F8E4M3, F8E5M2, F8E8M0, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64}

// pattern returns n deterministic bytes that differ with seed.
func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed*31 + 1)
	}
	return b
}

// writeFixture writes tensors to dir/name and returns the path.
func writeFixture(t *testing.T, dir, name string, tensors []WriteTensor, md map[string]string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := WriteFile(path, tensors, md); err != nil {
		t.Fatal(err)
	}
	return path
}

// rawFile builds a file from a header string and a data buffer, padding nothing.
func rawFile(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func TestRoundTrip(t *testing.T) {
	shapes := [][]int{{}, {3}, {2, 3}, {0}, {4, 0, 2}, {1, 2, 1, 2}}
	for _, dt := range allDTypes {
		t.Run(string(dt), func(t *testing.T) {
			var tensors []WriteTensor
			for i, shape := range shapes {
				tensors = append(tensors, WriteTensor{
					Name:  fmt.Sprintf("t%d.%s", i, dt),
					DType: dt,
					Shape: shape,
					Data:  pattern(numElements(shape)*dt.Size(), i),
				})
			}
			md := map[string]string{"format": "pt", "dtype": string(dt), "<&>": "\"quoted\"\n"}
			path := writeFixture(t, t.TempDir(), "x.safetensors", tensors, md)

			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if !reflect.DeepEqual(f.Header().Metadata, md) {
				t.Errorf("metadata = %v, want %v", f.Header().Metadata, md)
			}
			if got := len(f.Header().Tensors); got != len(tensors) {
				t.Fatalf("%d tensors, want %d", got, len(tensors))
			}
			var names []string
			for _, w := range tensors {
				names = append(names, w.Name)
				got, ok := f.Tensor(w.Name)
				if !ok {
					t.Fatalf("tensor %q missing", w.Name)
				}
				want := Tensor{Name: w.Name, DType: dt, Shape: w.Shape, Data: w.Data, File: path}
				if got.Name != want.Name || got.DType != want.DType || got.File != want.File ||
					!bytes.Equal(got.Data, want.Data) || numElements(got.Shape) != got.NumElements() ||
					fmt.Sprint(got.Shape) != fmt.Sprint(want.Shape) {
					t.Errorf("tensor %q = %+v, want %+v", w.Name, got, want)
				}
				if cap(got.Data) != len(got.Data) {
					t.Errorf("tensor %q: cap %d != len %d", w.Name, cap(got.Data), len(got.Data))
				}
			}
			if got := f.Names(); !reflect.DeepEqual(got, names) { // names are already sorted
				t.Errorf("Names() = %v, want %v", got, names)
			}
			if _, ok := f.Tensor("nope"); ok {
				t.Error("Tensor(nope) found")
			}
		})
	}
}

func TestWriteLayout(t *testing.T) {
	tensors := []WriteTensor{
		{Name: "b", DType: F32, Shape: []int{2}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{Name: "a", DType: U8, Shape: []int{}, Data: []byte{9}},
	}
	var buf bytes.Buffer
	if err := Write(&buf, tensors, map[string]string{"k": "v<>"}); err != nil {
		t.Fatal(err)
	}
	hdr := `{"__metadata__":{"k":"v<>"},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"U8","shape":[],"data_offsets":[8,9]}}`
	hdr += strings.Repeat(" ", (8-len(hdr)%8)%8)
	want := rawFile(hdr, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("Write output\n%q\nwant\n%q", buf.Bytes(), want)
	}

	// No metadata: no "__metadata__" key.
	buf.Reset()
	if err := Write(&buf, tensors[1:], nil); err != nil {
		t.Fatal(err)
	}
	hdr = `{"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}`
	hdr += strings.Repeat(" ", (8-len(hdr)%8)%8)
	if want := rawFile(hdr, []byte{9}); !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("Write output\n%q\nwant\n%q", buf.Bytes(), want)
	}

	// Empty file.
	buf.Reset()
	if err := Write(&buf, nil, nil); err != nil {
		t.Fatal(err)
	}
	if want := rawFile("{}      ", nil); !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("Write output %q, want %q", buf.Bytes(), want)
	}
}

func TestWriteErrors(t *testing.T) {
	ok := WriteTensor{Name: "ok", DType: F16, Shape: []int{2}, Data: make([]byte, 4)}
	tests := []struct {
		name    string
		tensors []WriteTensor
		md      map[string]string
		want    string
	}{
		{"duplicate", []WriteTensor{ok, ok}, nil, `tensor "ok": duplicate name`},
		{"reserved", []WriteTensor{{Name: "__metadata__", DType: U8, Shape: []int{0}}}, nil, "reserved"},
		{"dtype", []WriteTensor{{Name: "x", DType: "F4", Shape: []int{0}}}, nil, `tensor "x": unknown dtype "F4"`},
		{"negative", []WriteTensor{{Name: "x", DType: U8, Shape: []int{-1}}}, nil, "negative dimension"},
		{"short", []WriteTensor{{Name: "x", DType: F32, Shape: []int{2}, Data: make([]byte, 7)}}, nil, "data is 7 bytes, shape [2] of F32 needs 8"},
		{"overflow", []WriteTensor{{Name: "x", DType: F32, Shape: []int{math.MaxInt32, math.MaxInt32, math.MaxInt32}}}, nil, "overflows"},
		{"utf8 name", []WriteTensor{{Name: "\xff", DType: U8, Shape: []int{0}}}, nil, "UTF-8"},
		{"utf8 metadata", nil, map[string]string{"k": "\xff"}, `metadata "k"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tt.tensors, tt.md)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Write error = %v, want it to contain %q", err, tt.want)
			}
			if buf.Len() != 0 {
				t.Errorf("Write wrote %d bytes before failing", buf.Len())
			}
			path := filepath.Join(t.TempDir(), "bad.safetensors")
			err = WriteFile(path, tt.tensors, tt.md)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("WriteFile error = %v, want it to name %s and contain %q", err, path, tt.want)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("WriteFile left %s behind: %v", path, err)
			}
		})
	}
}

func TestParseHeaderValid(t *testing.T) {
	tests := []struct {
		name     string
		header   string
		dataSize int64
		want     Header
	}{
		{"empty", `{}`, 0, Header{}},
		{"trailing data and padding", "\t{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}  \n ", 10,
			Header{Tensors: []TensorInfo{{"a", U8, []int{2}, 0, 2}}}},
		{"holes, sorted by begin", `{"z":{"dtype":"I16","shape":[1],"data_offsets":[0,2]},"a":{"dtype":"F32","shape":[],"data_offsets":[8,12]},"m":{"dtype":"I8","shape":[3],"data_offsets":[4,7]}}`, 12,
			Header{Tensors: []TensorInfo{{"z", I16, []int{1}, 0, 2}, {"m", I8, []int{3}, 4, 7}, {"a", F32, []int{}, 8, 12}}}},
		{"zero-length tensors at boundaries", `{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"e":{"dtype":"F32","shape":[0,5],"data_offsets":[2,2]},"d":{"dtype":"F32","shape":[0],"data_offsets":[2,2]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]},"c":{"dtype":"BF16","shape":[0],"data_offsets":[0,0]}}`, 3,
			Header{Tensors: []TensorInfo{{"c", BF16, []int{0}, 0, 0}, {"a", U8, []int{2}, 0, 2}, {"d", F32, []int{0}, 2, 2}, {"e", F32, []int{0, 5}, 2, 2}, {"b", U8, []int{1}, 2, 3}}}},
		{"null metadata, unknown fields", `{"__metadata__":null,"a":{"extra":[1,{"x":null}],"dtype":"F8_E8M0","shape":[1],"data_offsets":[0,1]}}`, 1,
			Header{Tensors: []TensorInfo{{"a", F8E8M0, []int{1}, 0, 1}}}},
		{"metadata and escapes", `{"__metadata__":{"format":"pt","\u00e9":"\n"},"a\"\u0041":{"dtype":"I64","shape":[1,1],"data_offsets":[0,8]}}`, 8,
			Header{Metadata: map[string]string{"format": "pt", "é": "\n"}, Tensors: []TensorInfo{{"a\"A", I64, []int{1, 1}, 0, 8}}}},
		{"empty metadata", `{"__metadata__":{}}`, 0, Header{Metadata: map[string]string{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHeader([]byte(tt.header), tt.dataSize)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*h, tt.want) {
				t.Errorf("ParseHeader = %+v, want %+v", *h, tt.want)
			}
		})
	}
}

// headerErrorTests are headers ParseHeader must reject, with a part of the error.
var headerErrorTests = []struct {
	name     string
	header   string
	dataSize int64
	want     string
}{
	{"empty", ``, 0, "not a JSON object"},
	{"not json", `{"a":`, 0, "invalid header JSON"},
	{"array", `[]`, 0, "not a JSON object"},
	{"string", `"x"`, 0, "not a JSON object"},
	{"trailing garbage", `{}x`, 0, "after the top-level object"},
	{"two objects", `{}{}`, 0, "after the top-level object"},
	{"trailing NUL", "{}\x00", 0, "after the top-level object"},
	{"invalid utf8", "{\"\xff\":1}", 0, "UTF-8"},
	{"entry not object", `{"a":[1]}`, 0, `tensor "a": entry is an array, want an object`},
	{"missing dtype", `{"a":{"shape":[],"data_offsets":[0,1]}}`, 1, `tensor "a": missing "dtype"`},
	{"missing shape", `{"a":{"dtype":"U8","data_offsets":[0,1]}}`, 1, `tensor "a": missing "shape"`},
	{"missing offsets", `{"a":{"dtype":"U8","shape":[]}}`, 1, `tensor "a": missing "data_offsets"`},
	{"dtype not string", `{"a":{"dtype":1,"shape":[],"data_offsets":[0,1]}}`, 1, `"dtype" is a number`},
	{"null dtype", `{"a":{"dtype":null,"shape":[],"data_offsets":[0,1]}}`, 1, `"dtype" is null`},
	{"unknown dtype", `{"a":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}}`, 1, `tensor "a": unknown dtype "F4"`},
	{"lowercase dtype", `{"a":{"dtype":"f32","shape":[],"data_offsets":[0,4]}}`, 4, `unknown dtype "f32"`},
	{"shape not array", `{"a":{"dtype":"U8","shape":1,"data_offsets":[0,1]}}`, 1, `"shape" is a number`},
	{"null shape", `{"a":{"dtype":"U8","shape":null,"data_offsets":[0,1]}}`, 1, `"shape" is null`},
	{"shape float", `{"a":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}`, 1, `"shape"[0]: 1.0 is not an integer`},
	{"shape exponent", `{"a":{"dtype":"U8","shape":[1e0],"data_offsets":[0,1]}}`, 1, `not an integer`},
	{"shape string", `{"a":{"dtype":"U8","shape":["1"],"data_offsets":[0,1]}}`, 1, `"shape"[0]: is a string`},
	{"negative dim", `{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`, 0, `tensor "a": negative dimension -1`},
	{"huge dim", `{"a":{"dtype":"U8","shape":[99999999999999999999],"data_offsets":[0,0]}}`, 0, `out of range`},
	{"offsets not array", `{"a":{"dtype":"U8","shape":[],"data_offsets":{}}}`, 1, `"data_offsets" is an object`},
	{"one offset", `{"a":{"dtype":"U8","shape":[],"data_offsets":[0]}}`, 1, `"data_offsets" is an array of 1 elements`},
	{"three offsets", `{"a":{"dtype":"U8","shape":[],"data_offsets":[0,1,2]}}`, 2, `array of 3 elements`},
	{"negative offset", `{"a":{"dtype":"U8","shape":[0],"data_offsets":[-1,-1]}}`, 1, `negative data offset -1`},
	{"float offset", `{"a":{"dtype":"U8","shape":[],"data_offsets":[0,1.5]}}`, 2, `"data_offsets"[1]: 1.5 is not an integer`},
	{"begin after end", `{"a":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}}`, 2, `tensor "a": data_offsets [2,1] begin after end`},
	{"past data", `{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, 3, `tensor "a": data_offsets [0,4] exceed data size 3`},
	{"size mismatch", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 8, `tensor "a": data_offsets [0,4] span 4 bytes, shape [2] of F32 needs 8`},
	{"scalar mismatch", `{"a":{"dtype":"I64","shape":[],"data_offsets":[0,0]}}`, 8, `needs 8`},
	{"shape overflow", `{"a":{"dtype":"F32","shape":[2147483647,2147483647,2],"data_offsets":[0,0]}}`, 8, `tensor "a": shape [2147483647 2147483647 2] of F32 overflows`},
	{"shape overflow to zero", `{"a":{"dtype":"U8","shape":[65536,65536,65536,65536],"data_offsets":[0,0]}}`, 0, `overflows`},
	{"overlap", `{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}}`, 5, `tensor "b": data_offsets [3,5] overlap tensor "a" [0,4]`},
	{"same range", `{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"I32","shape":[],"data_offsets":[0,4]}}`, 4, `overlap tensor`},
	{"contained", `{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]},"c":{"dtype":"U8","shape":[2],"data_offsets":[8,10]}}`, 10, `tensor "b": data_offsets [4,6] overlap tensor "a" [0,8]`},
	{"overlap past a short one", `{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}`, 10, `tensor "b": data_offsets [1,3] overlap tensor "a" [0,8]`},
	{"empty inside", `{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}}`, 4, `tensor "b": data_offsets [2,2] overlap tensor "a" [0,4]`},
	{"duplicate tensor", `{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`, 0, `tensor "a": duplicate name`},
	{"duplicate after unescape", `{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"\u0061":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`, 0, `tensor "a": duplicate name`},
	{"duplicate field", `{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"dtype":"I8"}}`, 1, `duplicate key "dtype"`},
	{"duplicate metadata", `{"__metadata__":{},"__metadata__":{}}`, 0, `duplicate "__metadata__"`},
	{"duplicate metadata key", `{"__metadata__":{"k":"1","k":"2"}}`, 0, `duplicate key "k"`},
	{"metadata not object", `{"__metadata__":"x"}`, 0, `__metadata__: is a string`},
	{"metadata value not string", `{"__metadata__":{"n":1}}`, 0, `__metadata__: value of "n" is a number, want a string`},
	{"deep nesting", `{"a":{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}`, 0, `nested more than`},
	{"negative data size", `{}`, -1, `negative data size`},
}

func TestParseHeaderErrors(t *testing.T) {
	for _, tt := range headerErrorTests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHeader([]byte(tt.header), tt.dataSize)
			if err == nil {
				t.Fatalf("ParseHeader accepted it: %+v", h)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "safetensors: ") {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	huge := binary.LittleEndian.AppendUint64(nil, MaxHeaderSize+1)
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"empty file", nil, "file is 0 bytes, too short"},
		{"short file", []byte{1, 0, 0}, "file is 3 bytes, too short"},
		{"header over limit", append(huge, "{}"...), "exceeds the limit"},
		{"header length max uint64", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'}, "exceeds the limit"},
		{"header past end", rawFile("{}", nil)[:9], "header length 2 exceeds the 1 bytes after the length field"},
		{"bad header", rawFile(`{"a":1}`, nil), `tensor "a": entry is a number`},
		{"offsets past data", rawFile(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, []byte{1}), `tensor "a": data_offsets [0,2] exceed data size 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.safetensors")
			if err := os.WriteFile(path, tt.file, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err == nil {
				f.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.HasPrefix(err.Error(), "safetensors: "+path+": ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to name %s and contain %q", err, path, tt.want)
			}
		})
	}

	// Every header error is reported by Open too, naming the file.
	for _, tt := range headerErrorTests {
		if tt.dataSize < 0 {
			continue
		}
		path := filepath.Join(t.TempDir(), "bad.safetensors")
		if err := os.WriteFile(path, rawFile(tt.header, make([]byte, tt.dataSize)), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := Open(path)
		if err == nil {
			f.Close()
			t.Errorf("%s: Open succeeded", tt.name)
		} else if !strings.HasPrefix(err.Error(), "safetensors: "+path+": ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %q, want it to name %s and contain %q", tt.name, err, path, tt.want)
		}
	}

	for _, path := range []string{filepath.Join(t.TempDir(), "missing.safetensors"), t.TempDir()} {
		if f, err := Open(path); err == nil {
			f.Close()
			t.Errorf("Open(%s) succeeded", path)
		} else if !strings.Contains(err.Error(), path) {
			t.Errorf("Open(%s) error %q does not name the path", path, err)
		}
	}
}

func TestClose(t *testing.T) {
	path := writeFixture(t, t.TempDir(), "m.safetensors", []WriteTensor{{Name: "a", DType: U8, Shape: []int{1}, Data: []byte{7}}}, nil)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path() != path {
		t.Errorf("Path() = %q, want %q", f.Path(), path)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, ok := f.Tensor("a"); ok {
		t.Error("Tensor found after Close")
	}
}
