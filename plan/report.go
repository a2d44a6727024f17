package plan

import (
	"fmt"
	"io"
	"strings"
)

// DefaultPageBytes is the page size the planner counts pages in unless told
// otherwise (64 KiB: one 128x128 float32 state matrix).
const DefaultPageBytes = 64 * KB

// ReportOptions chooses what WriteReport prints.
type ReportOptions struct {
	// Lengths are the context lengths of the per-request table (positive).
	Lengths []int
	// PageBytes is the pool page size pages are counted in (positive).
	PageBytes int
	// Budget is the memory budget for the concurrency columns, in bytes;
	// 0 leaves them out.
	Budget int64
}

// WriteReport writes m's cache kinds and, for each length, the exact bytes
// and pages one request holds and, when opts.Budget > 0, how many such
// requests fit in the budget counting bytes and counting whole pages.
func WriteReport(w io.Writer, m Model, opts ReportOptions) error {
	if err := m.Validate(opts.PageBytes); err != nil {
		return err
	}
	if opts.Budget < 0 {
		return fmt.Errorf("plan: memory budget %d bytes is negative", opts.Budget)
	}
	for _, n := range opts.Lengths {
		if n <= 0 {
			return fmt.Errorf("plan: context length %d is not positive", n)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", m.Name, m.Description)
	fmt.Fprintf(&b, "  cache dtypes: %s\n", m.DTypes)
	fmt.Fprintf(&b, "  max context: %s tokens\n", Commas(int64(m.MaxContext)))

	kinds := [][]string{{"kind", "layers", "slot bytes", "tokens/slot", "fixed slots", "bytes/token", "fixed bytes"}}
	for _, s := range m.Specs {
		row := []string{s.Name, fmt.Sprint(len(s.Layers)), Commas(int64(s.SlotBytes))}
		if s.Growing() {
			row = append(row, fmt.Sprint(s.TokensPerSlot), "-", trimFloat(s.BytesPerToken()), "-")
		} else {
			row = append(row, "-", Commas(int64(s.FixedSlots)), "-", Commas(s.Bytes(0)))
		}
		kinds = append(kinds, row)
	}
	kinds = append(kinds, []string{"total", "", "", "", "", trimFloat(m.BytesPerToken()), Commas(m.FixedBytes())})
	writeTable(&b, "  ", kinds)

	fmt.Fprintf(&b, "  per request, exact (floor(L/tokens-per-slot) slots of each growing kind; pages of %s bytes, each layer's kind rounded up to whole pages):\n", Commas(int64(opts.PageBytes)))
	if opts.Budget > 0 {
		pages := opts.Budget / int64(opts.PageBytes)
		fmt.Fprintf(&b, "  budget %s bytes (%s) = %s pages\n", Commas(opts.Budget), HumanBytes(opts.Budget), Commas(pages))
	}
	head := []string{"context", "bytes", "memory", "pages"}
	if opts.Budget > 0 {
		head = append(head, "requests (bytes)", "requests (pages)")
	}
	rows := [][]string{head}
	for _, n := range opts.Lengths {
		if !m.Supports(n) {
			rows = append(rows, []string{Commas(int64(n)), Unsupported, "", ""})
			continue
		}
		row := []string{Commas(int64(n)), Commas(m.Bytes(n)), HumanBytes(m.Bytes(n)), Commas(int64(m.Pages(n, opts.PageBytes)))}
		if opts.Budget > 0 {
			row = append(row,
				Commas(int64(m.Concurrency(n, opts.Budget))),
				Commas(int64(m.ConcurrencyPages(n, opts.Budget, opts.PageBytes))))
		}
		rows = append(rows, row)
	}
	writeTable(&b, "  ", rows)
	_, err := io.WriteString(w, b.String())
	return err
}

// trimFloat formats an exact byte rate with thousands separators and only
// the decimals it needs ("3,850.25", "48,068").
func trimFloat(v float64) string {
	whole := int64(v)
	frac := v - float64(whole)
	if frac == 0 {
		return Commas(whole)
	}
	f := strings.TrimRight(fmt.Sprintf("%.6f", frac), "0")
	return Commas(whole) + strings.TrimPrefix(f, "0")
}

// writeTable writes rows with the first column left-aligned and the others
// right-aligned, two spaces apart; shorter rows leave their tail empty.
func writeTable(b *strings.Builder, indent string, rows [][]string) {
	var width []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len(c))
		}
	}
	for _, r := range rows {
		line := indent
		for i, c := range r {
			if i == 0 {
				line += fmt.Sprintf("%-*s", width[i], c)
			} else {
				line += fmt.Sprintf("  %*s", width[i], c)
			}
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
}
