package safetensors

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// shardTensors returns small distinct tensors with the given names.
func shardTensors(names ...string) []WriteTensor {
	var ts []WriteTensor
	for i, n := range names {
		ts = append(ts, WriteTensor{Name: n, DType: F32, Shape: []int{2}, Data: pattern(8, i+len(n))})
	}
	return ts
}

// writeIndex writes dir/model.safetensors.index.json.
func writeIndex(t *testing.T, dir, json string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, IndexFile), []byte(json), 0o644); err != nil {
		t.Fatal(err)
	}
}

const goodIndex = `{
  "metadata": {"total_size": 24},
  "weight_map": {
    "model.embed.weight": "model-00001-of-00002.safetensors",
    "model.layers.0.w": "model-00001-of-00002.safetensors",
    "lm_head.weight": "./model-00002-of-00002.safetensors"
  }
}`

// shardedDir builds a two-shard checkpoint with goodIndex.
func shardedDir(t *testing.T) string {
	dir := t.TempDir()
	writeFixture(t, dir, "model-00001-of-00002.safetensors", shardTensors("model.embed.weight", "model.layers.0.w"), nil)
	writeFixture(t, dir, "model-00002-of-00002.safetensors", shardTensors("lm_head.weight"), map[string]string{"format": "pt"})
	writeIndex(t, dir, goodIndex)
	return dir
}

func TestOpenDirIndexed(t *testing.T) {
	dir := shardedDir(t)
	// Neither a stray shard nor a golden file is opened when there is an index.
	writeFixture(t, dir, "golden.safetensors", shardTensors("model.embed.weight"), nil)

	c, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wantFiles := []string{filepath.Join(dir, "model-00001-of-00002.safetensors"), filepath.Join(dir, "model-00002-of-00002.safetensors")}
	if got := c.Files(); !reflect.DeepEqual(got, wantFiles) {
		t.Errorf("Files() = %v, want %v", got, wantFiles)
	}
	wantNames := []string{"lm_head.weight", "model.embed.weight", "model.layers.0.w"}
	if got := c.Names(); !reflect.DeepEqual(got, wantNames) {
		t.Errorf("Names() = %v, want %v", got, wantNames)
	}
	for name, file := range map[string]string{"model.embed.weight": wantFiles[0], "model.layers.0.w": wantFiles[0], "lm_head.weight": wantFiles[1]} {
		tn, ok := c.Tensor(name)
		if !ok {
			t.Fatalf("Tensor(%q) missing", name)
		}
		if tn.File != file || tn.Name != name || tn.DType != F32 || len(tn.Data) != 8 {
			t.Errorf("Tensor(%q) = %+v, want it in %s", name, tn, file)
		}
	}
	if tn, _ := c.Tensor("model.layers.0.w"); string(tn.Data) != string(pattern(8, 1+len("model.layers.0.w"))) {
		t.Errorf("model.layers.0.w data = %v", tn.Data)
	}
	if _, ok := c.Tensor("missing"); ok {
		t.Error("Tensor(missing) found")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Tensor("lm_head.weight"); ok {
		t.Error("Tensor found after Close")
	}
}

func TestOpenDirSingleAndGlob(t *testing.T) {
	// model.safetensors wins over other files.
	dir := t.TempDir()
	writeFixture(t, dir, "model.safetensors", shardTensors("a", "b"), nil)
	writeFixture(t, dir, "golden.safetensors", shardTensors("a", "logits"), nil)
	c, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Files(), []string{filepath.Join(dir, "model.safetensors")}; !reflect.DeepEqual(got, want) {
		t.Errorf("Files() = %v, want %v", got, want)
	}
	if got, want := c.Names(), []string{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	c.Close()

	// Otherwise every model*.safetensors file, sorted; other safetensors
	// files are not weights.
	dir = t.TempDir()
	writeFixture(t, dir, "model-2.safetensors", shardTensors("y"), nil)
	writeFixture(t, dir, "model-1.safetensors", shardTensors("z", "x"), nil)
	writeFixture(t, dir, "mtp_golden.safetensors", shardTensors("logits"), nil)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(dir, "model-dir.safetensors"), 0o755)
	c, err = OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, want := c.Files(), []string{filepath.Join(dir, "model-1.safetensors"), filepath.Join(dir, "model-2.safetensors")}; !reflect.DeepEqual(got, want) {
		t.Errorf("Files() = %v, want %v", got, want)
	}
	if got, want := c.Names(), []string{"x", "y", "z"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	if tn, ok := c.Tensor("y"); !ok || tn.File != filepath.Join(dir, "model-2.safetensors") {
		t.Errorf("Tensor(y) = %+v, %v", tn, ok)
	}

	// A folder whose model.safetensors is missing says so, and does not
	// read the reference data beside it as weights.
	dir = t.TempDir()
	writeFixture(t, dir, "golden.safetensors", shardTensors("logits"), nil)
	writeFixture(t, dir, "mtp_golden.safetensors", shardTensors("logits"), nil)
	_, err = OpenDir(dir)
	if err == nil || !strings.Contains(err.Error(), "model.safetensors") || !strings.Contains(err.Error(), "golden.safetensors, mtp_golden.safetensors is not read") {
		t.Errorf("a folder without weights: %v", err)
	}
}

func TestOpenDirErrors(t *testing.T) {
	shard1 := "model-00001-of-00002.safetensors"
	shard2 := "model-00002-of-00002.safetensors"
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		file  string // the file the error must name, relative to dir
		want  string
	}{
		{"empty dir", func(t *testing.T, dir string) {}, "", "no model.safetensors.index.json"},
		{"duplicate across files", func(t *testing.T, dir string) {
			writeFixture(t, dir, "model-a.safetensors", shardTensors("x", "dup"), nil)
			writeFixture(t, dir, "model-b.safetensors", shardTensors("dup"), nil)
		}, "model-b.safetensors", `tensor "dup": also in ` + "DIR/model-a.safetensors"},
		{"bad file in glob", func(t *testing.T, dir string) {
			writeFixture(t, dir, "model-a.safetensors", shardTensors("x"), nil)
			os.WriteFile(filepath.Join(dir, "model-b.safetensors"), []byte("short"), 0o644)
		}, "model-b.safetensors", "too short"},
		{"bad model.safetensors", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "model.safetensors"), rawFile(`{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}}`, nil), 0o644)
		}, "model.safetensors", `tensor "a": data_offsets [0,3] exceed data size 0`},
		{"index not json", func(t *testing.T, dir string) {
			writeIndex(t, dir, `{"weight_map":`)
		}, IndexFile, "invalid JSON"},
		{"index trailing data", func(t *testing.T, dir string) {
			writeIndex(t, dir, `{"weight_map":{}} {}`)
		}, IndexFile, "invalid JSON"},
		{"index no weight_map", func(t *testing.T, dir string) {
			writeIndex(t, dir, `{"metadata":{}}`)
		}, IndexFile, `missing "weight_map"`},
		{"index weight_map not object", func(t *testing.T, dir string) {
			writeIndex(t, dir, `{"weight_map":[]}`)
		}, IndexFile, `"weight_map" is an array`},
		{"index shard not string", func(t *testing.T, dir string) {
			writeIndex(t, dir, `{"weight_map":{"a":1}}`)
		}, IndexFile, `tensor "a": shard is a number`},
		{"index duplicate tensor", func(t *testing.T, dir string) {
			writeIndex(t, dir, `{"weight_map":{"a":"x.safetensors","a":"y.safetensors"}}`)
		}, IndexFile, `duplicate key "a"`},
		{"index shard outside dir", func(t *testing.T, dir string) {
			writeIndex(t, dir, `{"weight_map":{"a":"../x.safetensors"}}`)
		}, IndexFile, `tensor "a": shard "../x.safetensors" is not a file name inside`},
		{"index absolute shard", func(t *testing.T, dir string) {
			writeIndex(t, dir, `{"weight_map":{"a":"/etc/x.safetensors"}}`)
		}, IndexFile, `is not a file name inside`},
		{"missing shard", func(t *testing.T, dir string) {
			writeFixture(t, dir, shard1, shardTensors("model.embed.weight", "model.layers.0.w"), nil)
			writeIndex(t, dir, goodIndex)
		}, shard2, "no such file"},
		{"bad shard", func(t *testing.T, dir string) {
			writeFixture(t, dir, shard1, shardTensors("model.embed.weight", "model.layers.0.w"), nil)
			os.WriteFile(filepath.Join(dir, shard2), rawFile(`{`, nil), 0o644)
			writeIndex(t, dir, goodIndex)
		}, shard2, "invalid header JSON"},
		{"tensor missing from shard", func(t *testing.T, dir string) {
			writeFixture(t, dir, shard1, shardTensors("model.embed.weight"), nil)
			writeFixture(t, dir, shard2, shardTensors("lm_head.weight"), nil)
			writeIndex(t, dir, goodIndex)
		}, IndexFile, `tensor "model.layers.0.w": not in its shard DIR/` + shard1},
		{"tensor not listed", func(t *testing.T, dir string) {
			writeFixture(t, dir, shard1, shardTensors("model.embed.weight", "model.layers.0.w"), nil)
			writeFixture(t, dir, shard2, shardTensors("lm_head.weight", "extra"), nil)
			writeIndex(t, dir, goodIndex)
		}, shard2, `tensor "extra": not listed in DIR/` + IndexFile},
		{"tensor in the wrong shard", func(t *testing.T, dir string) {
			writeFixture(t, dir, shard1, shardTensors("model.embed.weight", "model.layers.0.w", "lm_head.weight"), nil)
			writeFixture(t, dir, shard2, shardTensors("lm_head.weight"), nil)
			writeIndex(t, dir, goodIndex)
		}, shard1, `tensor "lm_head.weight": DIR/` + IndexFile + ` lists it in shard "` + shard2 + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			c, err := OpenDir(dir)
			if err == nil {
				c.Close()
				t.Fatal("OpenDir succeeded")
			}
			msg := err.Error()
			want := strings.ReplaceAll(tt.want, "DIR/", dir+string(filepath.Separator))
			if !strings.Contains(msg, want) {
				t.Errorf("error %q, want it to contain %q", msg, want)
			}
			if file := filepath.Join(dir, tt.file); !strings.Contains(msg, "safetensors: "+file) && !strings.Contains(msg, file+":") {
				t.Errorf("error %q does not name %s", msg, file)
			}
		})
	}
}
