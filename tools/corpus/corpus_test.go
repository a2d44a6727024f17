package main

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeKJV returns `bible -f` output for a Bible in which every book has
// chapters chapters of verses verses each.
func fakeKJV(chapters, verses int) string {
	var b strings.Builder
	for _, bk := range books {
		for c := 1; c <= chapters; c++ {
			for v := 1; v <= verses; v++ {
				fmt.Fprintf(&b, "%s%d:%d Verse  %d of %s %d.\n", bk.abbrev, c, v, v, bk.name, c)
			}
		}
	}
	return b.String()
}

func TestParseKJV(t *testing.T) {
	chs, err := parseKJV(strings.NewReader(fakeKJV(2, 3)))
	if err != nil {
		t.Fatal(err)
	}
	if len(chs) != 2*len(books) {
		t.Fatalf("%d chapters", len(chs))
	}
	if c := chs[2]; c.book != 1 || c.number != 1 || !slices.Equal(c.verses, []string{"Verse 1 of Exodus 1.", "Verse 2 of Exodus 1.", "Verse 3 of Exodus 1."}) {
		t.Errorf("chapter 2 = %+v", c)
	}
	if got := kjvDoc(chs[0]); !slices.Equal(got[:3], []string{"The First Book of Moses, Called Genesis", "Genesis 1", "Verse 1 of Genesis 1."}) {
		t.Errorf("kjvDoc(Genesis 1) = %q", got)
	}
	psalm := chs[2*18+1]
	if got := kjvDoc(psalm); got[0] != "Psalm 2" || len(got) != 4 {
		t.Errorf("kjvDoc(Psalm 2) = %q", got)
	}

	good := fakeKJV(1, 2)
	for name, text := range map[string]string{
		"verse gap":     strings.Replace(good, "Ge1:2 ", "Ge1:3 ", 1),
		"chapter gap":   strings.Replace(good, "Exo1:1 ", "Exo2:1 ", 1),
		"book order":    strings.Replace(good, "Exo1:", "Lev1:", 2),
		"unknown book":  strings.Replace(good, "Ge1:1 ", "Gn1:1 ", 1),
		"bad reference": strings.Replace(good, "Ge1:1 ", "Ge1 ", 1),
		"no text":       strings.Replace(good, "Ge1:1 Verse  1 of Genesis 1.", "Ge1:1  ", 1),
		"missing books": good[:strings.Index(good, "Rev1:1")],
	} {
		if _, err := parseKJV(strings.NewReader(text)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestOSISParagraphs(t *testing.T) {
	markup := `<div type="x-milestone" subType="x-preverse" sID="pv1"/><title type="x-ms">Genesis</title> ` +
		`<div sID="gen3" type="x-p"/> Genesis is a name taken from the <hi type="italic">Greek</hi>; ` +
		`see <reference osisRef="Gen.1.1">Genesis 1:1</reference> &amp; more. <div eID="gen3" type="x-p"/>` +
		`<table><row><cell>Verses 1-2</cell><cell>The creation.</cell></row></table>` +
		`<milestone type="x-usfm-toc1" n="Genesis"/><lb/>Thom` + "\u0082\u00a0said\u202fso"
	want := []string{
		"Genesis",
		"Genesis is a name taken from the Greek; see Genesis 1:1 & more.",
		"Verses 1-2 The creation.",
		"Thomé said so",
	}
	if got := osisParagraphs(markup); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := osisParagraphs("a < b"); !slices.Equal(got, []string{"a < b"}) {
		t.Errorf("stray '<': %q", got)
	}
}

func TestCleanText(t *testing.T) {
	for in, want := range map[string]string{
		"  a \t b\n":            "a b",
		"K\u0084ndam":           "Kändam",
		"x\u202fy\u00a0z\u200b": "x y z",
		"\x01bell":              "bell",
	} {
		if got := cleanText(in); got != want {
			t.Errorf("cleanText(%q) = %q, want %q", in, got, want)
		}
	}
}

// writeModule writes a zCom module of one testament: one block, and the
// given entry text per key ("" for none; equal strings become one linked
// entry).
func writeModule(t *testing.T, dir, prefix string, texts []string) {
	t.Helper()
	var block bytes.Buffer
	var zv []byte
	at := make(map[string]int)
	for _, s := range texts {
		if s == "" {
			zv = binary.LittleEndian.AppendUint32(zv, 0)
			zv = binary.LittleEndian.AppendUint32(zv, 0)
			zv = binary.LittleEndian.AppendUint16(zv, 0)
			continue
		}
		off, ok := at[s]
		if !ok {
			off = block.Len()
			at[s] = off
			block.WriteString(s)
		}
		zv = binary.LittleEndian.AppendUint32(zv, 0)
		zv = binary.LittleEndian.AppendUint32(zv, uint32(off))
		zv = binary.LittleEndian.AppendUint16(zv, uint16(len(s)))
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(block.Bytes())
	zw.Close()
	var zs []byte
	zs = binary.LittleEndian.AppendUint32(zs, 0)
	zs = binary.LittleEndian.AppendUint32(zs, uint32(z.Len()))
	zs = binary.LittleEndian.AppendUint32(zs, uint32(block.Len()))
	for ext, data := range map[string][]byte{"bzs": zs, "bzv": zv, "bzz": z.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, prefix+"."+ext), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCommentaryDocs(t *testing.T) {
	chs, err := parseKJV(strings.NewReader(fakeKJV(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Keys per testament: 0, the testament heading, then per book its
	// heading, the chapter's heading and two verses.
	for _, tm := range []struct {
		prefix     string
		start, end int
	}{{"ot", 0, otBooks}, {"nt", otBooks, len(books)}} {
		texts := []string{"", `<milestone type="x-importer"/>`}
		for b := tm.start; b < tm.end; b++ {
			texts = append(texts, "", "", "", "")
		}
		if tm.prefix == "ot" {
			// Genesis: a book heading, a comment linked to both verses.
			texts[2] = `<div type="book"/><title>Genesis</title>`
			texts[4] = `<div type="x-p"/>On verses 1-2.<div type="x-p"/>`
			texts[5] = texts[4]
			// Exodus 1:2 only.
			texts[2+4+3] = `Exodus, verse <hi>two</hi>.`
		} else {
			texts[2+4*(len(books)-otBooks-1)+2] = `Revelation.`
		}
		writeModule(t, dir, tm.prefix, texts)
	}
	docs, err := commentaryDocs(dir, chs, func(b, c int) string { return "On " + chapterHeading(b, c) })
	if err != nil {
		t.Fatal(err)
	}
	want := []doc{
		{0, []string{"On Genesis 1", "Genesis", "On verses 1-2."}},
		{1, []string{"On Exodus 1", "Exodus, verse two."}},
		{len(books) - 1, []string{"On Revelation 1", "Revelation."}},
	}
	if len(docs) != len(want) {
		t.Fatalf("got %d docs: %v", len(docs), docs)
	}
	for i := range want {
		if docs[i].book != want[i].book || !slices.Equal(docs[i].lines, want[i].lines) {
			t.Errorf("doc %d = %+v, want %+v", i, docs[i], want[i])
		}
	}

	// A module laid out for another versification is refused.
	short, err := parseKJV(strings.NewReader(fakeKJV(2, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commentaryDocs(dir, short, func(b, c int) string { return "" }); err == nil {
		t.Error("no error for a module with the wrong number of keys")
	}
}

func TestHeldOut(t *testing.T) {
	n := 0
	for _, b := range books {
		if heldOut(b.name) {
			n++
		}
	}
	if n != 9 {
		t.Errorf("%d held-out books, want 9", n)
	}
}
