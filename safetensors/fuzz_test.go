package safetensors

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkHeader reports a broken invariant of a header ParseHeader accepted.
func checkHeader(t *testing.T, h *Header, dataSize int64) {
	t.Helper()
	names := make(map[string]bool)
	var maxEnd int64
	for i, ti := range h.Tensors {
		if names[ti.Name] {
			t.Fatalf("duplicate name %q", ti.Name)
		}
		names[ti.Name] = true
		if ti.Name == metadataKey {
			t.Fatalf("tensor named %q", metadataKey)
		}
		size := ti.DType.Size()
		if size == 0 {
			t.Fatalf("tensor %q: unknown dtype %q", ti.Name, ti.DType)
		}
		if ti.Begin < 0 || ti.Begin > ti.End || ti.End > dataSize {
			t.Fatalf("tensor %q: offsets [%d,%d] outside [0,%d]", ti.Name, ti.Begin, ti.End, dataSize)
		}
		n := int64(1)
		for _, d := range ti.Shape {
			if d < 0 {
				t.Fatalf("tensor %q: shape %v", ti.Name, ti.Shape)
			}
			n *= int64(d) // cannot overflow: checked below against the span
		}
		if want, ok := byteSize(ti.Shape, size); !ok || want != ti.End-ti.Begin || n*int64(size) != want {
			t.Fatalf("tensor %q: shape %v of %s in [%d,%d]", ti.Name, ti.Shape, ti.DType, ti.Begin, ti.End)
		}
		if i > 0 {
			p := h.Tensors[i-1]
			if p.Begin > ti.Begin {
				t.Fatalf("tensors not sorted by Begin: %q before %q", p.Name, ti.Name)
			}
			if ti.Begin < maxEnd {
				t.Fatalf("tensor %q [%d,%d] overlaps an earlier one ending at %d", ti.Name, ti.Begin, ti.End, maxEnd)
			}
		}
		maxEnd = max(maxEnd, ti.End)
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add([]byte(`{}`), int64(0))
	f.Add([]byte(`{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"BF16","shape":[],"data_offsets":[16,18]}}`), int64(18))
	f.Add([]byte(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[3,3]},"b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}}   `), int64(20))
	f.Add([]byte(`{"a":{"dtype":"F8_E4M3","shape":[4,4],"data_offsets":[0,16]},"s":{"dtype":"F8_E8M0","shape":[1,1],"data_offsets":[16,17]}}`), int64(17))
	for _, tt := range headerErrorTests {
		f.Add([]byte(tt.header), tt.dataSize)
	}
	f.Fuzz(func(t *testing.T, header []byte, dataSize int64) {
		h, err := ParseHeader(header, dataSize)
		if err != nil {
			if h != nil {
				t.Fatal("non-nil header with an error")
			}
			if !strings.HasPrefix(err.Error(), "safetensors: ") {
				t.Fatalf("error without prefix: %v", err)
			}
			return
		}
		checkHeader(t, h, dataSize)
		// Writing the accepted tensors back gives a file that parses to
		// the same tensors, contiguously (if small enough to allocate).
		var ws []WriteTensor
		var total int64
		for _, ti := range h.Tensors {
			if total += ti.End - ti.Begin; total > 1<<20 {
				return
			}
			ws = append(ws, WriteTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: make([]byte, ti.End-ti.Begin)})
		}
		var buf bytes.Buffer
		if err := Write(&buf, ws, h.Metadata); err != nil {
			if strings.Contains(err.Error(), "exceeds the limit") {
				return
			}
			t.Fatalf("Write of an accepted header: %v", err)
		}
		f, err := newFile("rewritten", buf.Bytes())
		if err != nil {
			t.Fatalf("rewritten file rejected: %v", err)
		}
		if len(f.hdr.Tensors) != len(h.Tensors) || len(f.hdr.Metadata) != len(h.Metadata) {
			t.Fatalf("rewritten header has %d tensors and %d metadata, want %d and %d",
				len(f.hdr.Tensors), len(f.hdr.Metadata), len(h.Tensors), len(h.Metadata))
		}
		for k, v := range h.Metadata {
			if f.hdr.Metadata[k] != v {
				t.Fatalf("metadata %q = %q after rewrite, want %q", k, f.hdr.Metadata[k], v)
			}
		}
		for _, w := range ws {
			got, ok := f.Tensor(w.Name)
			if !ok || got.DType != w.DType || len(got.Data) != len(w.Data) {
				t.Fatalf("tensor %q after rewrite: %+v, %v", w.Name, got, ok)
			}
		}
	})
}

func FuzzOpen(f *testing.F) {
	var buf bytes.Buffer
	Write(&buf, []WriteTensor{
		{Name: "w", DType: F16, Shape: []int{2, 2}, Data: pattern(8, 1)},
		{Name: "ids", DType: I64, Shape: []int{1}, Data: pattern(8, 2)},
		{Name: "s", DType: F8E8M0, Shape: []int{3}, Data: pattern(3, 3)},
	}, map[string]string{"format": "pt"})
	f.Add(buf.Bytes())
	f.Add([]byte{})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, '{', '}'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'})
	for _, tt := range headerErrorTests {
		if tt.dataSize >= 0 && tt.dataSize < 64 {
			f.Add(rawFile(tt.header, make([]byte, tt.dataSize)))
		}
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, file []byte) {
		path := filepath.Join(dir, "fuzz.safetensors")
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		sf, err := Open(path)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "safetensors: "+path+": ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		defer sf.Close()
		n := binary.LittleEndian.Uint64(file)
		checkHeader(t, sf.Header(), int64(len(file))-8-int64(n))
		for _, name := range sf.Names() {
			tn, ok := sf.Tensor(name)
			if !ok {
				t.Fatalf("tensor %q listed but not found", name)
			}
			var sum byte
			for _, b := range tn.Data { // touch every byte of the mapping
				sum += b
			}
			_ = sum
			if tn.DType == F32 || tn.DType == F16 || tn.DType == BF16 || tn.DType == F64 || strings.HasPrefix(string(tn.DType), "F8") {
				if _, err := tn.Float32s(); err != nil {
					t.Fatalf("Float32s: %v", err)
				}
			} else if _, err := tn.Int64s(); err != nil && tn.DType != U64 {
				t.Fatalf("Int64s: %v", err)
			}
		}
	})
}
