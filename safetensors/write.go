package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"unicode/utf8"
)

// WriteTensor is a tensor to be written by Write.
type WriteTensor struct {
	Name  string
	DType DType
	Shape []int  // empty for a scalar
	Data  []byte // little-endian elements, row-major; len must match DType and Shape
}

// Write writes tensors and metadata to w in the safetensors format.
//
// The data buffer holds the tensors contiguously in the given order; the
// header lists "__metadata__" first (omitted if metadata is empty, keys
// sorted), then the tensors in the given order, and is padded with spaces
// to a multiple of 8 bytes, as the reference implementation does, so the
// data buffer starts 8-byte aligned in the file. The output is a function
// of the arguments alone. To keep every tensor aligned to its element size,
// order the tensors by decreasing DType.Size, as the reference
// implementation does.
//
// Write checks its arguments before writing anything: names must be unique
// and not "__metadata__", dtypes known, dimensions non-negative and each Data
// exactly as long as its shape and dtype imply.
func Write(w io.Writer, tensors []WriteTensor, metadata map[string]string) error {
	hdr, err := encodeHeader("write", tensors, metadata)
	if err != nil {
		return err
	}
	return write(w, hdr, tensors)
}

// write writes the encoded header hdr and the data of tensors to w.
func write(w io.Writer, hdr []byte, tensors []WriteTensor) error {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(hdr)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes tensors and metadata to the file at path as Write does,
// creating or truncating it. On error the file is removed.
func WriteFile(path string, tensors []WriteTensor, metadata map[string]string) (err error) {
	hdr, err := encodeHeader(path, tensors, metadata)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(path)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw, hdr, tensors); err != nil {
		f.Close()
		return fmt.Errorf("safetensors: writing %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("safetensors: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// encodeHeader validates tensors and metadata and returns the padded header
// JSON. Errors name where, the destination.
func encodeHeader(where string, tensors []WriteTensor, metadata map[string]string) ([]byte, error) {
	p := prefix(where)
	var b bytes.Buffer
	b.WriteByte('{')
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		writeJSONString(&b, metadataKey)
		b.WriteString(":{")
		for i, k := range keys {
			if !utf8.ValidString(k) || !utf8.ValidString(metadata[k]) {
				return nil, fmt.Errorf("%smetadata %q: key or value is not valid UTF-8", p, k)
			}
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(&b, k)
			b.WriteByte(':')
			writeJSONString(&b, metadata[k])
		}
		b.WriteByte('}')
	}
	seen := make(map[string]bool, len(tensors))
	var off int64
	for i, t := range tensors {
		if err := checkWriteTensor(t, seen); err != nil {
			return nil, fmt.Errorf("%stensor %q: %v", p, t.Name, err)
		}
		seen[t.Name] = true
		end := off + int64(len(t.Data))
		if i > 0 || len(metadata) > 0 {
			b.WriteByte(',')
		}
		writeJSONString(&b, t.Name)
		b.WriteString(`:{"dtype":`)
		writeJSONString(&b, string(t.DType))
		b.WriteString(`,"shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, off, end)
		off = end
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	if b.Len() > MaxHeaderSize {
		return nil, fmt.Errorf("%sheader of %d bytes exceeds the limit of %d", p, b.Len(), MaxHeaderSize)
	}
	return b.Bytes(), nil
}

// checkWriteTensor checks one tensor given to Write; seen holds the names before it.
func checkWriteTensor(t WriteTensor, seen map[string]bool) error {
	if !utf8.ValidString(t.Name) {
		return errors.New("name is not valid UTF-8")
	}
	if t.Name == metadataKey {
		return fmt.Errorf("name %q is reserved for metadata", metadataKey)
	}
	if seen[t.Name] {
		return errors.New("duplicate name")
	}
	if t.DType.Size() == 0 {
		return fmt.Errorf("unknown dtype %q", string(t.DType))
	}
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("negative dimension in shape %v", t.Shape)
		}
	}
	want, ok := byteSize(t.Shape, t.DType.Size())
	if !ok {
		return fmt.Errorf("shape %v of %s overflows", t.Shape, t.DType)
	}
	if int64(len(t.Data)) != want {
		return fmt.Errorf("data is %d bytes, shape %v of %s needs %d", len(t.Data), t.Shape, t.DType, want)
	}
	return nil
}

// writeJSONString appends s to b as a JSON string, without HTML escaping.
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)           // cannot fail for a string
	b.Truncate(b.Len() - 1) // the newline Encode appends
}
