package plan

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Units of the handbook's ledger: 1024-based, printed as KB, MB and GB.
const (
	KB = 1024
	MB = 1024 * KB
	GB = 1024 * MB
)

// The context lengths of the handbook's ledger columns.
const (
	Ledger128K = 131_072
	Ledger1M   = 1_048_576
)

// LedgerRow is one row of the handbook's ledger, formatted as the handbook
// formats it: bytes per token as "%.1f KB", fixed bytes as "%.0f MB", and the
// request at 128K and 1M tokens as "%.2f GB" by the handbook's formula
// (BytesPerToken()*L + FixedBytes()), or "unsupported" beyond MaxContext.
type LedgerRow struct {
	Name     string
	PerToken string // "3.8 KB"
	Fixed    string // "15 MB"
	At128K   string // "0.48 GB"
	At1M     string // "3.77 GB" or "unsupported"
}

// Unsupported is printed for a context beyond the model's MaxContext.
const Unsupported = "unsupported"

// Ledger returns m's row of the handbook's ledger.
func (m Model) Ledger() LedgerRow {
	var t [2]string
	for i, l := range [2]int{Ledger128K, Ledger1M} {
		if m.Supports(l) {
			t[i] = fmt.Sprintf("%.2f GB", m.LedgerBytes(l)/GB)
		} else {
			t[i] = Unsupported
		}
	}
	return LedgerRow{
		Name:     m.Name,
		PerToken: fmt.Sprintf("%.1f KB", m.BytesPerToken()/KB),
		Fixed:    fmt.Sprintf("%.0f MB", float64(m.FixedBytes())/MB),
		At128K:   t[0],
		At1M:     t[1],
	}
}

// String is the row as Ledger prints it, the handbook's sentence in English:
// "DeepSeek-V4-Flash: 3.8 KB per token, 15 MB fixed per request; a 128K
// request 0.48 GB, a 1M request 3.77 GB".
func (r LedgerRow) String() string {
	return fmt.Sprintf("%s: %s per token, %s fixed per request; a 128K request %s, a 1M request %s",
		r.Name, r.PerToken, r.Fixed, r.At128K, r.At1M)
}

// LedgerHeader is the line Ledger prints before the rows.
const LedgerHeader = "KV ledger (the handbook's formula: bytes per token x L + fixed bytes per request; KB, MB, GB are 1024-based)"

// Ledger writes the handbook's ledger for models: LedgerHeader, then one
// LedgerRow line per model.
func Ledger(w io.Writer, models []Model) error {
	var b strings.Builder
	b.WriteString(LedgerHeader + "\n")
	for _, m := range models {
		b.WriteString(m.Ledger().String() + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Assumptions writes one line per model stating its cache dtypes and maximum
// context, so a ledger is never read without them.
func Assumptions(w io.Writer, models []Model) error {
	width := 0
	for _, m := range models {
		width = max(width, len(m.Name))
	}
	var b strings.Builder
	b.WriteString("cache dtypes:\n")
	for _, m := range models {
		fmt.Fprintf(&b, "  %-*s  %s; max context %s\n", width, m.Name, m.DTypes, Commas(int64(m.MaxContext)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Commas formats n with thousands separators, as Python's "{:,}" does.
func Commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
