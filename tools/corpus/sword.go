package main

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// A SWORD zCom (or zCom4) commentary module, as Debian's sword-comm-*
// packages install it under usr/share/sword/modules/comments/zcom/NAME/.
//
// Each testament has three files, PREFIX.Xzs, PREFIX.Xzv and PREFIX.Xzz,
// where PREFIX is "ot" or "nt" and X is "b" (a compressed block per book)
// or "c" (a block per chapter):
//
//   - .Xzz holds zlib-compressed blocks, one after another;
//   - .Xzs has 12 bytes per block: offset and size in .Xzz and the
//     uncompressed size, little-endian uint32s;
//   - .Xzv has one entry per key of the KJV versification: uint32 block,
//     uint32 offset in the uncompressed block, and the entry's size as a
//     uint16 (zCom, 10 bytes) or uint32 (zCom4, 12 bytes).
//
// Keys of a testament are laid out as: 0 unused, 1 the testament's heading,
// then for each book its heading, and for each chapter its heading followed
// by its verses.

// swordEntry is the text of one key; several keys may share one entry
// (a comment on a range of verses is linked to each of them).
type swordEntry struct {
	block, offset, size uint32
}

// A testament of a module: its decompressed blocks and its entries.
type swordTestament struct {
	blocks  [][]byte
	entries []swordEntry
}

// text returns the markup of entry e.
func (t *swordTestament) text(e swordEntry) (string, error) {
	if e.size == 0 {
		return "", nil
	}
	if int(e.block) >= len(t.blocks) {
		return "", fmt.Errorf("entry refers to block %d of %d", e.block, len(t.blocks))
	}
	b := t.blocks[e.block]
	end := uint64(e.offset) + uint64(e.size)
	if end > uint64(len(b)) {
		return "", fmt.Errorf("entry %d+%d is past the end of block %d (%d bytes)", e.offset, e.size, e.block, len(b))
	}
	return string(b[e.offset:end]), nil
}

// readTestament reads testament prefix ("ot" or "nt") of the module in dir,
// which must have exactly keys entries.
func readTestament(dir, prefix string, keys int) (*swordTestament, error) {
	var kind string
	for _, k := range []string{"b", "c"} {
		if _, err := os.Stat(filepath.Join(dir, prefix+"."+k+"zv")); err == nil {
			kind = k
			break
		}
	}
	if kind == "" {
		return nil, fmt.Errorf("%s: no %s.bzv or %s.czv", dir, prefix, prefix)
	}
	base := filepath.Join(dir, prefix+"."+kind)
	idx, err := os.ReadFile(base + "zs")
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(base + "zz")
	if err != nil {
		return nil, err
	}
	verses, err := os.ReadFile(base + "zv")
	if err != nil {
		return nil, err
	}
	if len(idx)%12 != 0 {
		return nil, fmt.Errorf("%szs: size %d is not a multiple of 12", base, len(idx))
	}
	t := &swordTestament{}
	for i := 0; i < len(idx); i += 12 {
		off := binary.LittleEndian.Uint32(idx[i:])
		size := binary.LittleEndian.Uint32(idx[i+4:])
		usize := binary.LittleEndian.Uint32(idx[i+8:])
		if uint64(off)+uint64(size) > uint64(len(data)) {
			return nil, fmt.Errorf("%szs: block %d is past the end of %szz", base, i/12, base)
		}
		zr, err := zlib.NewReader(bytes.NewReader(data[off : off+size]))
		if err != nil {
			return nil, fmt.Errorf("%szz: block %d: %w", base, i/12, err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("%szz: block %d: %w", base, i/12, err)
		}
		if uint32(len(b)) != usize {
			return nil, fmt.Errorf("%szz: block %d: %d bytes, index says %d", base, i/12, len(b), usize)
		}
		t.blocks = append(t.blocks, b)
	}
	var width int
	switch len(verses) {
	case 10 * keys:
		width = 10
	case 12 * keys:
		width = 12
	default:
		return nil, fmt.Errorf("%szv: %d bytes is not %d entries of 10 or 12 bytes", base, len(verses), keys)
	}
	t.entries = make([]swordEntry, keys)
	for i := range t.entries {
		r := verses[i*width:]
		e := swordEntry{block: binary.LittleEndian.Uint32(r), offset: binary.LittleEndian.Uint32(r[4:])}
		if width == 10 {
			e.size = uint32(binary.LittleEndian.Uint16(r[8:]))
		} else {
			e.size = binary.LittleEndian.Uint32(r[8:])
		}
		t.entries[i] = e
	}
	return t, nil
}

// commentaryDocs reads the module in dir and returns one document per
// chapter that has comments, in canonical order, using the chapters' verse
// counts to lay out the keys. heading names a chapter's document, for
// example "Matthew Henry's Concise Commentary on Genesis 1". A comment
// linked to several keys appears once, with the first of them; a book's
// heading goes with its first chapter.
func commentaryDocs(dir string, chapters []chapter, heading func(book, ch int) string) ([]doc, error) {
	var docs []doc
	for _, tm := range []struct {
		prefix     string
		start, end int // books
	}{{"ot", 0, otBooks}, {"nt", otBooks, len(books)}} {
		var chs []chapter
		for _, c := range chapters {
			if c.book >= tm.start && c.book < tm.end {
				chs = append(chs, c)
			}
		}
		keys := 2 + (tm.end - tm.start) + len(chs)
		for _, c := range chs {
			keys += len(c.verses)
		}
		t, err := readTestament(dir, tm.prefix, keys)
		if err != nil {
			return nil, err
		}
		seen := make(map[swordEntry]bool)
		k := 2
		var pending bytes.Buffer // markup of the chapter being read
		for _, c := range chs {
			n := 1 + len(c.verses) // chapter heading and verses
			if c.number == 1 {
				n++ // the book's heading
			}
			for _, e := range t.entries[k : k+n] {
				if e.size == 0 || seen[e] {
					continue
				}
				seen[e] = true
				s, err := t.text(e)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %w", dir, chapterHeading(c.book, c.number), err)
				}
				pending.WriteString(s)
				pending.WriteByte(' ')
			}
			k += n
			if paras := osisParagraphs(pending.String()); len(paras) > 0 {
				lines := append([]string{heading(c.book, c.number)}, paras...)
				docs = append(docs, doc{book: c.book, lines: lines})
			}
			pending.Reset()
		}
		if k != keys {
			return nil, fmt.Errorf("%s: %s: laid out %d keys of %d", dir, tm.prefix, k, keys)
		}
	}
	return docs, nil
}
