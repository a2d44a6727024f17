package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// A chapter of the King James Version.
type chapter struct {
	book   int      // index into books
	number int      // from 1
	verses []string // verse i+1 is verses[i]
}

// parseKJV reads the output of `bible -f Gen1:1-Rev22:21` (Debian's
// bible-kjv): one verse a line, "Ge1:1 In the beginning God created ...".
// It checks that the books come in canonical order and that chapters and
// verses are numbered from 1 without gaps, and returns the chapters in
// order.
func parseKJV(r io.Reader) ([]chapter, error) {
	var chapters []chapter
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	bookIdx := -1
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		ref, text, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("line %d: want \"REF TEXT\", got %q", lineNo, line)
		}
		abbrev, ch, v, err := parseRef(ref)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		if bookIdx < 0 || books[bookIdx].abbrev != abbrev {
			bookIdx++
			if bookIdx >= len(books) || books[bookIdx].abbrev != abbrev {
				return nil, fmt.Errorf("line %d: book %q is not the next book in canonical order", lineNo, abbrev)
			}
			if ch != 1 {
				return nil, fmt.Errorf("line %d: %s starts at chapter %d", lineNo, abbrev, ch)
			}
		}
		last := len(chapters) - 1
		if last < 0 || chapters[last].book != bookIdx || chapters[last].number != ch {
			want := 1
			if last >= 0 && chapters[last].book == bookIdx {
				want = chapters[last].number + 1
			}
			if ch != want {
				return nil, fmt.Errorf("line %d: %s: want chapter %d, got %d", lineNo, ref, want, ch)
			}
			chapters = append(chapters, chapter{book: bookIdx, number: ch})
			last++
		}
		c := &chapters[last]
		if v != len(c.verses)+1 {
			return nil, fmt.Errorf("line %d: %s: want verse %d, got %d", lineNo, ref, len(c.verses)+1, v)
		}
		text = cleanText(text)
		if text == "" {
			return nil, fmt.Errorf("line %d: %s: empty verse", lineNo, ref)
		}
		c.verses = append(c.verses, text)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if bookIdx != len(books)-1 {
		return nil, fmt.Errorf("got %d books, want %d", bookIdx+1, len(books))
	}
	return chapters, nil
}

// parseRef splits "1Sm3:16" into "1Sm", 3 and 16.
func parseRef(ref string) (abbrev string, ch, v int, err error) {
	colon := strings.LastIndexByte(ref, ':')
	if colon < 0 {
		return "", 0, 0, fmt.Errorf("bad reference %q", ref)
	}
	i := colon
	for i > 0 && ref[i-1] >= '0' && ref[i-1] <= '9' {
		i--
	}
	abbrev = ref[:i]
	ch, err1 := strconv.Atoi(ref[i:colon])
	v, err2 := strconv.Atoi(ref[colon+1:])
	if abbrev == "" || err1 != nil || err2 != nil || ch < 1 || v < 1 {
		return "", 0, 0, fmt.Errorf("bad reference %q", ref)
	}
	return abbrev, ch, v, nil
}

// kjvDoc returns the document of a chapter: the book's title when the
// chapter is its first, a heading such as "Genesis 1" or "Psalm 23", then
// one verse a line.
func kjvDoc(c chapter) []string {
	b := books[c.book]
	lines := make([]string, 0, len(c.verses)+2)
	if c.number == 1 {
		lines = append(lines, b.title)
	}
	lines = append(lines, chapterHeading(c.book, c.number))
	return append(lines, c.verses...)
}

// chapterHeading names a chapter: "Genesis 1", "Psalm 23".
func chapterHeading(book, number int) string {
	return books[book].chapter + " " + strconv.Itoa(number)
}
