// Package safetensors reads and writes the safetensors tensor file format,
// single files and sharded checkpoint directories.
//
// A safetensors file is an 8-byte little-endian unsigned header length N, N
// bytes of JSON header, then the data buffer. The header is a JSON object
// that maps each tensor name to {"dtype", "shape", "data_offsets"}, with an
// optional "__metadata__" object of string values. data_offsets are
// [begin, end) byte offsets into the data buffer, which starts at byte 8+N.
//
// Open memory-maps a file read-only (on Unix; elsewhere it reads the file
// into memory) and validates its header completely before returning, so that
// every Tensor it hands out lies inside the file and has exactly the length
// its dtype and shape imply. Tensor data aliases the mapping: it must not be
// written to and must not be used after the File or Checkpoint is closed.
package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"unicode/utf8"
)

// MaxHeaderSize is the largest JSON header, in bytes, that Open and
// ParseHeader accept. It is not smaller than the reference implementation's
// limit of 100,000,000 bytes.
const MaxHeaderSize = 100 << 20

// metadataKey is the header key that holds the free-form string metadata.
const metadataKey = "__metadata__"

// TensorInfo describes one tensor of a header.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int // empty for a scalar
	// Begin and End are the byte offsets of the tensor data, [Begin, End),
	// relative to the start of the data buffer.
	Begin, End int64
}

// NumElements returns the product of the dimensions of the shape (1 for a scalar).
func (ti TensorInfo) NumElements() int { return numElements(ti.Shape) }

// Header is a parsed and validated safetensors header.
type Header struct {
	// Metadata holds the "__metadata__" entries; it is nil if the header has none.
	Metadata map[string]string
	// Tensors are sorted by Begin, then End, then Name.
	Tensors []TensorInfo
}

// ParseHeader parses and validates the JSON header of a safetensors file whose
// data buffer is dataSize bytes long (the file size minus 8 minus len(headerJSON)).
//
// It accepts a header only if it is valid UTF-8 and one JSON object, with
// only JSON whitespace after it and no duplicate keys at any level, whose
// "__metadata__" key (if present) holds an object of strings or null and
// whose every other key names a tensor with a known "dtype", a "shape" of
// non-negative integers and "data_offsets" [begin, end] with
// 0 <= begin <= end <= dataSize and end-begin equal to the element count
// times the dtype size. Tensors must not overlap; a zero-length tensor counts
// as overlapping a tensor whose interior contains its offset. Unknown keys
// inside a tensor entry are ignored, as the reference implementation does.
// Unlike the reference implementation, holes between tensors and unused
// bytes at the end of the data buffer are allowed.
//
// The first problem found is reported, in header order for problems of a
// single tensor; the error names the tensor.
func ParseHeader(headerJSON []byte, dataSize int64) (*Header, error) {
	return parseHeader("", headerJSON, dataSize)
}

// prefix returns the start of an error message about file.
func prefix(file string) string {
	if file == "" {
		return "safetensors: "
	}
	return "safetensors: " + file + ": "
}

func parseHeader(file string, hdr []byte, dataSize int64) (*Header, error) {
	p := prefix(file)
	if dataSize < 0 {
		return nil, fmt.Errorf("%snegative data size %d", p, dataSize)
	}
	if len(hdr) > MaxHeaderSize {
		return nil, fmt.Errorf("%sheader is %d bytes, more than the limit of %d", p, len(hdr), MaxHeaderSize)
	}
	if !utf8.Valid(hdr) {
		return nil, fmt.Errorf("%sheader is not valid UTF-8", p)
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	if err := expectDelim(dec, '{'); err != nil {
		return nil, fmt.Errorf("%sheader is not a JSON object: %v", p, err)
	}
	h := &Header{}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%sinvalid header JSON: %v", p, err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%sinvalid header JSON: unexpected %v", p, tok)
		}
		if seen[key] {
			if key == metadataKey {
				return nil, fmt.Errorf("%sduplicate %q key", p, metadataKey)
			}
			return nil, fmt.Errorf("%stensor %q: duplicate name", p, key)
		}
		seen[key] = true
		v, err := decodeValue(dec, 0)
		if err != nil {
			return nil, fmt.Errorf("%sinvalid header JSON in the value of %q: %v", p, key, err)
		}
		if key == metadataKey {
			md, err := parseMetadata(v)
			if err != nil {
				return nil, fmt.Errorf("%s%s: %v", p, metadataKey, err)
			}
			h.Metadata = md
			continue
		}
		ti, err := parseTensorInfo(key, v, dataSize)
		if err != nil {
			return nil, fmt.Errorf("%stensor %q: %v", p, key, err)
		}
		h.Tensors = append(h.Tensors, ti)
	}
	if err := expectDelim(dec, '}'); err != nil {
		return nil, fmt.Errorf("%sinvalid header JSON: %v", p, err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("unexpected %v", tok)
		}
		return nil, fmt.Errorf("%sinvalid header JSON after the top-level object: %v", p, err)
	}
	// Seen keys are unique, so keys decoded from distinct byte strings that
	// unescape to the same name were reported as duplicates above.
	sort.Slice(h.Tensors, func(i, j int) bool {
		a, b := &h.Tensors[i], &h.Tensors[j]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		if a.End != b.End {
			return a.End < b.End
		}
		return a.Name < b.Name
	})
	// Sorted by Begin, the ranges are disjoint iff each begins at or after
	// the largest End before it.
	for i, maxEnd, last := 0, int64(0), -1; i < len(h.Tensors); i++ {
		t := &h.Tensors[i]
		if last >= 0 && t.Begin < maxEnd {
			o := &h.Tensors[last]
			return nil, fmt.Errorf("%stensor %q: data_offsets [%d,%d] overlap tensor %q [%d,%d]",
				p, t.Name, t.Begin, t.End, o.Name, o.Begin, o.End)
		}
		if t.End > maxEnd || last < 0 {
			maxEnd, last = t.End, i
		}
	}
	return h, nil
}

// maxDepth bounds the nesting of JSON values in a header. Tensor entries
// need three levels; the bound keeps hostile input from exhausting the stack.
const maxDepth = 64

// decodeValue reads one JSON value from dec, like dec.Decode into an any
// with UseNumber, but rejects objects with duplicate keys and values nested
// more than maxDepth deep.
func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth >= maxDepth {
		return nil, fmt.Errorf("values nested more than %d deep", maxDepth)
	}
	tok, err := dec.Token()
	if err == io.EOF {
		return nil, errors.New("unexpected end of JSON")
	}
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		m := make(map[string]any)
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, ok := kt.(string)
			if !ok {
				return nil, fmt.Errorf("unexpected %v", kt)
			}
			if _, dup := m[k]; dup {
				return nil, fmt.Errorf("duplicate key %q", k)
			}
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, expectDelim(dec, '}')
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		return a, expectDelim(dec, ']')
	case json.Delim('}'), json.Delim(']'):
		return nil, fmt.Errorf("unexpected %v", tok)
	}
	return tok, nil
}

// expectDelim reads the next token of dec and checks that it is d.
func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err == io.EOF {
		return errors.New("unexpected end of JSON")
	}
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("got %v, want %q", describe(tok), string(d))
	}
	return nil
}

// describe names the JSON value or token v for an error message.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case json.Delim:
		return strconv.Quote(string(v))
	}
	return fmt.Sprintf("%T", v)
}

// parseMetadata converts a decoded "__metadata__" value.
func parseMetadata(v any) (map[string]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		md := make(map[string]string, len(v))
		for k, x := range v {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("value of %q is %s, want a string", k, describe(x))
			}
			md[k] = s
		}
		return md, nil
	}
	return nil, fmt.Errorf("is %s, want an object of strings", describe(v))
}

// parseTensorInfo converts and validates one decoded tensor entry.
func parseTensorInfo(name string, v any, dataSize int64) (TensorInfo, error) {
	ti := TensorInfo{Name: name}
	m, ok := v.(map[string]any)
	if !ok {
		return ti, fmt.Errorf("entry is %s, want an object", describe(v))
	}
	dt, ok := m["dtype"]
	if !ok {
		return ti, errors.New(`missing "dtype"`)
	}
	s, ok := dt.(string)
	if !ok {
		return ti, fmt.Errorf(`"dtype" is %s, want a string`, describe(dt))
	}
	ti.DType = DType(s)
	if ti.DType.Size() == 0 {
		return ti, fmt.Errorf("unknown dtype %q", s)
	}

	sh, ok := m["shape"]
	if !ok {
		return ti, errors.New(`missing "shape"`)
	}
	dims, ok := sh.([]any)
	if !ok {
		return ti, fmt.Errorf(`"shape" is %s, want an array of integers`, describe(sh))
	}
	ti.Shape = make([]int, len(dims))
	for i, d := range dims {
		n, err := jsonInt(d)
		if err != nil {
			return ti, fmt.Errorf(`"shape"[%d]: %v`, i, err)
		}
		if n < 0 {
			return ti, fmt.Errorf("negative dimension %d in shape", n)
		}
		if int64(int(n)) != n {
			return ti, fmt.Errorf("dimension %d does not fit in an int", n)
		}
		ti.Shape[i] = int(n)
	}

	do, ok := m["data_offsets"]
	if !ok {
		return ti, errors.New(`missing "data_offsets"`)
	}
	offs, ok := do.([]any)
	if !ok || len(offs) != 2 {
		return ti, fmt.Errorf(`"data_offsets" is %s, want an array of two integers`, describeLen(do))
	}
	var be [2]int64
	for i, o := range offs {
		n, err := jsonInt(o)
		if err != nil {
			return ti, fmt.Errorf(`"data_offsets"[%d]: %v`, i, err)
		}
		if n < 0 {
			return ti, fmt.Errorf("negative data offset %d", n)
		}
		be[i] = n
	}
	ti.Begin, ti.End = be[0], be[1]
	if ti.Begin > ti.End {
		return ti, fmt.Errorf("data_offsets [%d,%d] begin after end", ti.Begin, ti.End)
	}
	if ti.End > dataSize {
		return ti, fmt.Errorf("data_offsets [%d,%d] exceed data size %d", ti.Begin, ti.End, dataSize)
	}
	want, ok := byteSize(ti.Shape, ti.DType.Size())
	if !ok {
		return ti, fmt.Errorf("shape %v of %s overflows", ti.Shape, ti.DType)
	}
	if got := ti.End - ti.Begin; got != want {
		return ti, fmt.Errorf("data_offsets [%d,%d] span %d bytes, shape %v of %s needs %d",
			ti.Begin, ti.End, got, ti.Shape, ti.DType, want)
	}
	return ti, nil
}

// describeLen is describe, giving the length of arrays.
func describeLen(v any) string {
	if a, ok := v.([]any); ok {
		return fmt.Sprintf("an array of %d elements", len(a))
	}
	return describe(v)
}

// jsonInt converts a decoded JSON number that is written as an integer.
func jsonInt(v any) (int64, error) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("is %s, want an integer", describe(v))
	}
	n, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("integer %s out of range", num)
		}
		return 0, fmt.Errorf("%s is not an integer", num)
	}
	return n, nil
}

// byteSize returns product(shape)*elemSize, or false if it does not fit in an int64.
func byteSize(shape []int, elemSize int) (int64, bool) {
	for _, d := range shape {
		if d == 0 {
			return 0, true
		}
	}
	n := uint64(elemSize)
	for _, d := range shape {
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		n = lo
	}
	return int64(n), true
}

// numElements returns the product of shape (1 for a scalar). It does not
// check for overflow: the shapes of validated tensors cannot overflow.
func numElements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
