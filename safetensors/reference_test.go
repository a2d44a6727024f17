package safetensors

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The files under testdata/reference and testdata/sharded were written by the
// reference implementation (safetensors 0.8.0 with torch 2.11; transformers
// 5.17 save_pretrained for the sharded checkpoint) by testdata/gen_reference.py.
// Each folder's tensors.json gives every tensor's dtype, shape and the SHA-256
// of its bytes as torch saw them.

type refTensor struct {
	DType  string `json:"dtype"`
	Shape  []int  `json:"shape"`
	SHA256 string `json:"sha256"`
}

func loadRefTensors(t *testing.T, path string) map[string]refTensor {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]refTensor
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

type tensorGetter interface {
	Tensor(name string) (Tensor, bool)
}

func checkRefTensors(t *testing.T, src tensorGetter, names []string, want map[string]refTensor) {
	t.Helper()
	if len(names) != len(want) {
		t.Errorf("%d tensors, want %d", len(names), len(want))
	}
	for name, w := range want {
		tn, ok := src.Tensor(name)
		if !ok {
			t.Errorf("tensor %q missing", name)
			continue
		}
		sum := sha256.Sum256(tn.Data)
		shape := tn.Shape
		if shape == nil {
			shape = []int{}
		}
		if string(tn.DType) != w.DType || !reflect.DeepEqual(shape, w.Shape) || hex.EncodeToString(sum[:]) != w.SHA256 {
			t.Errorf("tensor %q: %s %v sha256 %x, want %s %v %s", name, tn.DType, tn.Shape, sum, w.DType, w.Shape, w.SHA256)
		}
	}
}

func TestReferenceFile(t *testing.T) {
	path := filepath.Join("testdata", "reference", "reference.safetensors")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if want := map[string]string{"format": "pt", "k": "v"}; !reflect.DeepEqual(f.Header().Metadata, want) {
		t.Errorf("metadata %v, want %v", f.Header().Metadata, want)
	}
	checkRefTensors(t, f, f.Names(), loadRefTensors(t, filepath.Join("testdata", "reference", "tensors.json")))

	// Writing the same tensors in the file's order reproduces the file.
	var ws []WriteTensor
	for _, ti := range f.Header().Tensors {
		tn, _ := f.Tensor(ti.Name)
		ws = append(ws, WriteTensor{Name: tn.Name, DType: tn.DType, Shape: tn.Shape, Data: tn.Data})
	}
	var buf bytes.Buffer
	if err := Write(&buf, ws, f.Header().Metadata); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), orig) {
		t.Errorf("Write does not reproduce %s byte for byte", path)
	}
}

func TestReferenceSharded(t *testing.T) {
	dir := filepath.Join("testdata", "sharded")
	c, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := len(c.Files()); got != 5 {
		t.Errorf("%d files, want 5", got)
	}
	checkRefTensors(t, c, c.Names(), loadRefTensors(t, filepath.Join(dir, "tensors.json")))
}
