// Command corpus writes the strata-kjv training corpus from the unpacked
// Debian packages that build.sh downloads: the King James Version (as
// Debian's bible program prints it) and public-domain Bible commentaries in
// SWORD format.
//
// Usage:
//
//	go run ./tools/corpus -kjv kjv-verses.txt -pkgs DIR [-sources LIST] -out DIR
//
// It writes OUT/train.txt and OUT/heldout.txt. Each is a sequence of
// documents separated by one empty line, and ends with a newline; a
// document is one or more non-empty lines and never contains an empty line.
// A document is a chapter of the Bible (its first line "Genesis 1" or
// "Psalm 23", preceded in a book's first chapter by the book's title, then
// one verse a line, without verse numbers) or a commentary's remarks on one
// chapter (a heading such as "Matthew Henry's Concise Commentary on
// Genesis 1", then one paragraph a line). The chapters of a few whole books
// (see heldOut) go to heldout.txt and everything else to train.txt;
// commentaries on the held-out books are left out altogether, so that the
// held-out text is the Bible's alone and none of it is quoted in training.
//
// The output depends only on the inputs: running it twice gives the same
// bytes.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A source of documents.
type source struct {
	name    string // as given to -sources
	module  string // SWORD module directory name, "" for the KJV
	heading func(book, ch int) string
}

// sources lists the known sources in the order they are written.
func sources() []source {
	on := func(prefix string) func(int, int) string {
		return func(book, ch int) string { return prefix + chapterHeading(book, ch) }
	}
	return []source{
		{name: "kjv"},
		{name: "mhcc", module: "mhcc", heading: on("Matthew Henry's Concise Commentary on ")},
		{name: "scofield", module: "scofield", heading: on("Scofield Reference Notes on ")},
		{name: "tdavid", module: "tdavid", heading: on("Spurgeon's Treasury of David on ")},
	}
}

// A document: lines of text, from a chapter of a book.
type doc struct {
	book  int
	lines []string
}

func main() {
	kjvPath := flag.String("kjv", "", "the KJV as `bible -f Gen1:1-Rev22:21` prints it")
	pkgs := flag.String("pkgs", "", "directory with the unpacked packages, one subdirectory per package")
	srcList := flag.String("sources", "kjv,mhcc,scofield,tdavid", "comma-separated sources to include (kjv is required)")
	out := flag.String("out", "", "output directory")
	flag.Parse()
	if *kjvPath == "" || *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: corpus -kjv FILE -pkgs DIR [-sources LIST] -out DIR")
		os.Exit(2)
	}
	if err := run(*kjvPath, *pkgs, *srcList, *out); err != nil {
		fmt.Fprintln(os.Stderr, "corpus:", err)
		os.Exit(1)
	}
}

func run(kjvPath, pkgs, srcList, out string) error {
	want := make(map[string]bool)
	for _, s := range strings.Split(srcList, ",") {
		want[strings.TrimSpace(s)] = true
	}
	if !want["kjv"] {
		return fmt.Errorf("-sources %q: kjv is required (its chapters lay out the commentaries)", srcList)
	}
	f, err := os.Open(kjvPath)
	if err != nil {
		return err
	}
	chapters, err := parseKJV(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", kjvPath, err)
	}
	nverses := 0
	for _, c := range chapters {
		nverses += len(c.verses)
	}
	fmt.Fprintf(os.Stderr, "corpus: kjv: %d books, %d chapters, %d verses\n", len(books), len(chapters), nverses)

	var train, held []doc
	known := make(map[string]bool)
	for _, src := range sources() {
		known[src.name] = true
		if !want[src.name] {
			continue
		}
		var docs []doc
		if src.module == "" {
			for _, c := range chapters {
				docs = append(docs, doc{book: c.book, lines: kjvDoc(c)})
			}
		} else {
			if pkgs == "" {
				return fmt.Errorf("source %s needs -pkgs", src.name)
			}
			dir := filepath.Join(pkgs, "sword-comm-"+src.module, "usr/share/sword/modules/comments/zcom", src.module)
			docs, err = commentaryDocs(dir, chapters, src.heading)
			if err != nil {
				return err
			}
		}
		var nt, nh, bt, bh int
		for _, d := range docs {
			size := docBytes(d)
			switch {
			case !heldOut(books[d.book].name):
				train = append(train, d)
				nt, bt = nt+1, bt+size
			case src.module == "":
				held = append(held, d)
				nh, bh = nh+1, bh+size
			}
		}
		fmt.Fprintf(os.Stderr, "corpus: %s: %d train documents (%d bytes), %d held-out documents (%d bytes)\n",
			src.name, nt, bt, nh, bh)
	}
	for s := range want {
		if !known[s] {
			return fmt.Errorf("-sources: unknown source %q", s)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := writeDocs(filepath.Join(out, "train.txt"), train); err != nil {
		return err
	}
	if err := writeDocs(filepath.Join(out, "heldout.txt"), held); err != nil {
		return err
	}
	return nil
}

// docBytes is the size of d's text, its lines joined by newlines.
func docBytes(d doc) int {
	n := len(d.lines) - 1
	for _, l := range d.lines {
		n += len(l)
	}
	return n
}

// writeDocs writes docs to path, separated by empty lines, with a final
// newline. It writes to a temporary file first so that an interrupted run
// leaves no partial file behind.
func writeDocs(path string, docs []doc) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i, d := range docs {
		if i > 0 {
			w.WriteByte('\n')
		}
		for _, l := range d.lines {
			if l == "" || strings.ContainsAny(l, "\r\n") {
				f.Close()
				return fmt.Errorf("internal error: bad line %q in document %q", l, d.lines[0])
			}
			w.WriteString(l)
			w.WriteByte('\n')
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "corpus: wrote %s: %d documents\n", path, len(docs))
	return nil
}
