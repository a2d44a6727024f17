package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// IndexFile and SingleFile are the names OpenDir looks for in a checkpoint directory.
const (
	IndexFile  = "model.safetensors.index.json"
	SingleFile = "model.safetensors"
)

// Checkpoint is a set of safetensors files that together hold a model's
// tensors, each tensor name in exactly one file. Its methods may be called
// concurrently, except Close (see File.Close).
type Checkpoint struct {
	files  []*File // sorted by path
	byName map[string]*File
	names  []string // sorted
}

// OpenDir opens the checkpoint in directory dir:
//
//   - if dir/model.safetensors.index.json exists, the shards its "weight_map"
//     ({tensor name: file name relative to dir}) names. Every tensor the
//     index lists must be in the shard it names, and every tensor of a shard
//     must be listed for that shard. The index's "metadata" is not used;
//   - otherwise, if dir/model.safetensors exists, that file alone;
//   - otherwise, every model*.safetensors file in dir (shards named as
//     save_pretrained names them, model-00001-of-00002.safetensors), which
//     must not share tensor names. Other safetensors files in the folder
//     (reference data such as golden.safetensors) are never read as
//     weights.
//
// Every file is opened and validated as by Open. Errors name the file at fault.
func OpenDir(dir string) (*Checkpoint, error) {
	indexPath := filepath.Join(dir, IndexFile)
	idx, err := os.ReadFile(indexPath)
	switch {
	case err == nil:
		return openIndexed(dir, indexPath, idx)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("safetensors: %w", err)
	}

	var paths []string
	single := filepath.Join(dir, SingleFile)
	if _, err := os.Stat(single); err == nil {
		paths = []string{single}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("safetensors: %w", err)
	} else {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("safetensors: %w", err)
		}
		var others []string
		for _, e := range ents { // sorted by name
			switch name := e.Name(); {
			case e.IsDir() || !strings.HasSuffix(name, ".safetensors"):
			case strings.HasPrefix(name, "model"):
				paths = append(paths, filepath.Join(dir, name))
			default:
				others = append(others, name)
			}
		}
		if len(paths) == 0 {
			msg := fmt.Sprintf("safetensors: %s: no weights: no %s, %s or model*.safetensors file", dir, IndexFile, SingleFile)
			if len(others) > 0 {
				msg += fmt.Sprintf(" (%s is not read as weights)", strings.Join(others, ", "))
			}
			return nil, errors.New(msg)
		}
	}

	c := &Checkpoint{byName: make(map[string]*File)}
	for _, path := range paths {
		f, err := Open(path)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.files = append(c.files, f)
		for _, t := range f.hdr.Tensors {
			if other, dup := c.byName[t.Name]; dup {
				c.Close()
				return nil, fmt.Errorf("safetensors: %s: tensor %q: also in %s", path, t.Name, other.path)
			}
			c.byName[t.Name] = f
		}
	}
	c.sortNames()
	return c, nil
}

// openIndexed opens the shards named by the index file indexPath, whose contents are idx.
func openIndexed(dir, indexPath string, idx []byte) (*Checkpoint, error) {
	weightMap, err := parseIndex(idx)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %v", indexPath, err)
	}
	// Clean the shard names so that "a" and "./a" are the same shard.
	seen := make(map[string]bool)
	var shards []string
	for name, shard := range weightMap {
		clean := filepath.Clean(filepath.FromSlash(shard))
		if !filepath.IsLocal(clean) {
			return nil, fmt.Errorf("safetensors: %s: tensor %q: shard %q is not a file name inside %s", indexPath, name, shard, dir)
		}
		if !seen[clean] {
			seen[clean] = true
			shards = append(shards, clean)
		}
		weightMap[name] = clean
	}
	sort.Slice(shards, func(i, j int) bool {
		return filepath.Join(dir, shards[i]) < filepath.Join(dir, shards[j])
	})

	c := &Checkpoint{byName: make(map[string]*File, len(weightMap))}
	for _, shard := range shards {
		path := filepath.Join(dir, shard)
		f, err := Open(path)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.files = append(c.files, f)
		for _, t := range f.hdr.Tensors {
			want, listed := weightMap[t.Name]
			if !listed {
				c.Close()
				return nil, fmt.Errorf("safetensors: %s: tensor %q: not listed in %s", path, t.Name, indexPath)
			}
			if want != shard {
				c.Close()
				return nil, fmt.Errorf("safetensors: %s: tensor %q: %s lists it in shard %q", path, t.Name, indexPath, want)
			}
			c.byName[t.Name] = f
		}
	}
	// Every tensor present is listed for its own shard, so what is missing
	// from c.byName is listed but absent from its shard.
	if len(c.byName) != len(weightMap) {
		var missing []string
		for name := range weightMap {
			if _, ok := c.byName[name]; !ok {
				missing = append(missing, name)
			}
		}
		sort.Strings(missing)
		name := missing[0]
		c.Close()
		return nil, fmt.Errorf("safetensors: %s: tensor %q: not in its shard %s (%d listed tensors missing)",
			indexPath, name, filepath.Join(dir, weightMap[name]), len(missing))
	}
	c.sortNames()
	return c, nil
}

// parseIndex returns the "weight_map" of an index file, rejecting duplicate
// tensor names. Other top-level keys, such as "metadata", are ignored.
func parseIndex(idx []byte) (map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(idx))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the top-level value")
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("index is %s, want an object", describe(v))
	}
	wm, ok := top["weight_map"]
	if !ok {
		return nil, errors.New(`missing "weight_map"`)
	}
	m, ok := wm.(map[string]any)
	if !ok {
		return nil, fmt.Errorf(`"weight_map" is %s, want an object`, describe(wm))
	}
	out := make(map[string]string, len(m))
	for name, s := range m {
		shard, ok := s.(string)
		if !ok {
			return nil, fmt.Errorf("tensor %q: shard is %s, want a string", name, describe(s))
		}
		out[name] = shard
	}
	return out, nil
}

func (c *Checkpoint) sortNames() {
	c.names = make([]string, 0, len(c.byName))
	for n := range c.byName {
		c.names = append(c.names, n)
	}
	sort.Strings(c.names)
}

// Names returns the names of all tensors of the checkpoint, sorted.
// The caller may modify the returned slice.
func (c *Checkpoint) Names() []string { return append([]string(nil), c.names...) }

// Tensor returns the tensor called name, or false if there is none or the
// checkpoint is closed. Its File field names the shard holding it.
func (c *Checkpoint) Tensor(name string) (Tensor, bool) {
	f, ok := c.byName[name]
	if !ok {
		return Tensor{}, false
	}
	return f.Tensor(name)
}

// Files returns the paths of the checkpoint's files (dir joined with the
// file name), sorted.
func (c *Checkpoint) Files() []string {
	paths := make([]string, len(c.files))
	for i, f := range c.files {
		paths[i] = f.path
	}
	return paths
}

// Close closes all files of the checkpoint and returns the errors of
// those that failed to close. Tensor data obtained from c must not be used
// afterwards.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.files {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.byName, c.names = nil, nil
	return errors.Join(errs...)
}
