package tokenizer

import "unicode/utf8"

// Decoder turns a stream of token ids into text incrementally. A token may
// end in the middle of a UTF-8 sequence; Decoder holds such bytes back until
// the sequence is complete (or known to be invalid), so every string it
// returns is valid UTF-8 and the concatenation of all of them equals Decode
// of the same ids.
//
// A Decoder is not safe for concurrent use.
type Decoder struct {
	t           *Tokenizer
	skipSpecial bool
	buf         []byte // bytes not yet returned
}

// NewDecoder returns a streaming decoder. When skipSpecial is true, special
// tokens produce no text.
func (t *Tokenizer) NewDecoder(skipSpecial bool) *Decoder {
	return &Decoder{t: t, skipSpecial: skipSpecial}
}

// Add decodes one more id and returns the text that is now complete, which
// may be empty. Ids that are not in the vocabulary are ignored.
func (d *Decoder) Add(id int32) string {
	if len(d.buf) == 0 && id >= 0 && int(id) < len(d.t.valid) && d.t.valid[id] && !(d.skipSpecial && d.t.special[id]) {
		// Common case: nothing pending and a token of whole characters.
		if s := d.t.decoded[id]; utf8.ValidString(s) {
			return s
		}
	}
	d.appendID(id)
	return string(d.take(false))
}

// Flush returns the remaining text at the end of the stream: an incomplete
// UTF-8 sequence becomes U+FFFD. The Decoder can then be reused.
func (d *Decoder) Flush() string {
	return string(d.take(true))
}

// Reset discards any pending bytes.
func (d *Decoder) Reset() { d.buf = d.buf[:0] }

func (d *Decoder) appendID(id int32) {
	t := d.t
	if id < 0 || int(id) >= len(t.valid) || !t.valid[id] {
		return
	}
	if d.skipSpecial && t.special[id] {
		return
	}
	d.buf = append(d.buf, t.decoded[id]...)
}

// take returns the valid UTF-8 text at the start of d.buf, with invalid
// sequences replaced by U+FFFD, and keeps an incomplete trailing sequence
// unless final is true.
func (d *Decoder) take(final bool) []byte {
	out, rest := sanitizeUTF8(nil, d.buf, final)
	n := copy(d.buf, rest)
	d.buf = d.buf[:n]
	return out
}

// sanitizeUTF8 appends b to dst, replacing each maximal subpart of an
// ill-formed UTF-8 sequence with U+FFFD (the Unicode "substitution of maximal
// subparts" practice, as in Rust's from_utf8_lossy and WHATWG's decoder).
// When final is false, a trailing truncated but so far valid sequence is
// not consumed and is returned as rest.
func sanitizeUTF8(dst, b []byte, final bool) (out, rest []byte) {
	i := 0
	for i < len(b) {
		c := b[i]
		if c < utf8.RuneSelf {
			j := i + 1
			for j < len(b) && b[j] < utf8.RuneSelf {
				j++
			}
			dst = append(dst, b[i:j]...)
			i = j
			continue
		}
		if r, n := utf8.DecodeRune(b[i:]); r != utf8.RuneError || n > 1 {
			dst = append(dst, b[i:i+n]...)
			i += n
			continue
		}
		// Invalid or truncated: find the length of the maximal subpart.
		need, lo, hi := seqInfo(c)
		if need == 0 {
			dst = append(dst, "\uFFFD"...)
			i++
			continue
		}
		j := i + 1
		for k := 1; k <= need && j < len(b); k++ {
			l, h := byte(0x80), byte(0xBF)
			if k == 1 {
				l, h = lo, hi
			}
			if b[j] < l || b[j] > h {
				break
			}
			j++
		}
		if j == len(b) && !final {
			// Truncated but possibly valid: wait for more bytes.
			return dst, b[i:]
		}
		dst = append(dst, "\uFFFD"...)
		i = j
	}
	return dst, nil
}

// seqInfo returns, for a UTF-8 lead byte, the number of continuation bytes
// and the valid range of the first one; need is 0 for bytes that cannot
// start a sequence.
func seqInfo(c byte) (need int, lo, hi byte) {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 1, 0x80, 0xBF
	case c == 0xE0:
		return 2, 0xA0, 0xBF
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		return 2, 0x80, 0xBF
	case c == 0xED:
		return 2, 0x80, 0x9F
	case c == 0xF0:
		return 3, 0x90, 0xBF
	case c >= 0xF1 && c <= 0xF3:
		return 3, 0x80, 0xBF
	case c == 0xF4:
		return 3, 0x80, 0x8F
	}
	return 0, 0, 0
}
