package main

import (
	"html"
	"strings"
	"unicode"
)

// osisParagraphs turns OSIS markup, as SWORD modules store it, into plain
// paragraphs. Block elements (div, p, title, chapter, list items, table
// rows, line groups, lb) end a paragraph; other elements (hi, reference, w,
// q, foreign, ...) keep their text and lose their tags; milestones have no
// text. Entities are decoded and each paragraph is cleaned with cleanText.
func osisParagraphs(markup string) []string {
	var paras []string
	var cur strings.Builder
	flush := func() {
		if p := cleanText(html.UnescapeString(cur.String())); p != "" {
			paras = append(paras, p)
		}
		cur.Reset()
	}
	for markup != "" {
		lt := strings.IndexByte(markup, '<')
		if lt < 0 {
			cur.WriteString(markup)
			break
		}
		cur.WriteString(markup[:lt])
		gt := strings.IndexByte(markup[lt:], '>')
		if gt < 0 {
			// A stray '<' in text: keep it.
			cur.WriteString(markup[lt:])
			break
		}
		tag := markup[lt+1 : lt+gt]
		markup = markup[lt+gt+1:]
		switch tagName(tag) {
		case "div", "p", "title", "chapter", "item", "list", "row", "table", "lg", "l", "lb", "head":
			flush()
		case "cell":
			cur.WriteByte(' ')
		}
	}
	flush()
	return paras
}

// tagName returns the element name of the inside of a tag: "hi" for
// `hi type="bold"`, `/hi` and `hi/`.
func tagName(tag string) string {
	tag = strings.TrimPrefix(tag, "/")
	end := strings.IndexFunc(tag, func(r rune) bool { return r == ' ' || r == '/' || r == '\t' || r == '\n' })
	if end >= 0 {
		tag = tag[:end]
	}
	return tag
}

// cleanText normalises a line of text: C1 control characters (which the
// sources use for a few accented letters in the IBM PC code page 437) become
// those letters, other control characters and all white space (including
// no-break spaces) become single spaces, and leading and trailing space is
// removed. The result never contains a newline.
func cleanText(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if r >= 0x80 && r <= 0x9f {
			r = []rune(cp437High)[r-0x80] // rare: a few letters in all
		}
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '\u200b' || r == '\ufeff' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// cp437High maps bytes 0x80..0x9f of code page 437 to Unicode.
const cp437High = "ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜ¢£¥₧ƒ"
