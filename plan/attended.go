package plan

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/strata-inference/strata/model/deepseekv4"
)

// AttendedEntries is the handbook's attended(pos, ratio, topk, window): how
// many kv entries the query at position pos (0-based) attends in one layer.
// Every layer sees min(window, pos+1) raw entries of its sliding window; a
// compressed layer of the given rate (rate > 1) adds its (pos+1)/rate
// completed entries, at most topk of them when topk > 0 (a CSA layer's
// indexer selects the top-k). rate <= 1 is a window-only layer.
func AttendedEntries(pos, rate, topk, window int) int {
	swa := min(window, pos+1)
	if rate <= 1 {
		return swa
	}
	done := (pos + 1) / rate
	if topk > 0 {
		return swa + min(done, topk)
	}
	return swa + done
}

// AttendedGroup is one decode step's attention work in one group of layers
// of the same kind and rate.
type AttendedGroup struct {
	// Label is the handbook's name of the group: "C4" (CSA, rate 4),
	// "C128" (HCA, rate 128), or "window-only".
	Label  string
	Attn   deepseekv4.AttnKind
	Rate   int // 0 for window-only layers
	Layers int // how many main layers the group has
	// Entries is the kv entries one layer of the group attends.
	Entries int
	// Scored is the compressed entries the indexer scores to pick the top-k
	// (CSA layers; 0 otherwise).
	Scored int
}

// Attended returns, for the query of the last token of an n-token context
// (position n-1) of a DeepSeek-V4 config, the entries each group of main
// layers attends: CSA groups by rate, then HCA groups by rate, then the
// window-only layers. n must be positive.
func Attended(c *deepseekv4.Config, n int) []AttendedGroup {
	type key struct {
		attn deepseekv4.AttnKind
		rate int
	}
	count := map[key]int{}
	for _, l := range c.Layers {
		k := key{l.Attn, l.Rate}
		if l.Attn == deepseekv4.Window {
			k.rate = 0
		}
		count[k]++
	}
	var groups []AttendedGroup
	for _, attn := range []deepseekv4.AttnKind{deepseekv4.CSA, deepseekv4.HCA, deepseekv4.Window} {
		rates := map[int]int{}
		for k, v := range count {
			if k.attn == attn {
				rates[k.rate] = v
			}
		}
		for _, r := range sortedRates(rates) {
			g := AttendedGroup{Attn: attn, Rate: r, Layers: rates[r]}
			switch attn {
			case deepseekv4.CSA:
				g.Label = fmt.Sprintf("C%d", r)
				g.Entries = AttendedEntries(n-1, r, c.IndexTopK, c.Window)
				g.Scored = n / r
			case deepseekv4.HCA:
				g.Label = fmt.Sprintf("C%d", r)
				g.Entries = AttendedEntries(n-1, r, 0, c.Window)
			default:
				g.Label = "window-only"
				g.Entries = AttendedEntries(n-1, 0, 0, c.Window)
			}
			groups = append(groups, g)
		}
	}
	return groups
}

// WriteAttended writes the entries attended per decode step at each context
// length, one line per length in the handbook's layout:
//
//	context     4,096: full attention     4,096 entries; C4 layers 640 (indexer scores   1,024), C128 layers   160, window-only layers 128
//
// It fails for a model that is not DeepSeek-V4 (m.V4 nil) and for lengths
// that are not positive; lengths beyond m.MaxContext are reported as
// unsupported.
func WriteAttended(w io.Writer, m Model, lengths []int) error {
	if m.V4 == nil {
		return fmt.Errorf("plan: %s is not a DeepSeek-V4 model; attended entries are computed for DeepSeek-V4 configs only", m.Name)
	}
	c := m.V4
	var b strings.Builder
	var desc []string
	for _, g := range Attended(c, max(1, c.Window)) {
		switch g.Attn {
		case deepseekv4.CSA:
			desc = append(desc, fmt.Sprintf("%d %s (CSA, rate %d, top %d of the indexer's scores)", g.Layers, g.Label, g.Rate, c.IndexTopK))
		case deepseekv4.HCA:
			desc = append(desc, fmt.Sprintf("%d %s (HCA, rate %d, all entries)", g.Layers, g.Label, g.Rate))
		default:
			desc = append(desc, fmt.Sprintf("%d window-only", g.Layers))
		}
	}
	fmt.Fprintf(&b, "%s: entries attended per decode step, per layer (query at position L-1; every layer also sees its %d-token window)\n", m.Name, c.Window)
	fmt.Fprintf(&b, "  layers: %s\n", strings.Join(desc, ", "))
	for _, n := range lengths {
		if n <= 0 {
			return fmt.Errorf("plan: context length %d is not positive", n)
		}
		if !m.Supports(n) {
			fmt.Fprintf(&b, "  context %9s: %s (max context %s)\n", Commas(int64(n)), Unsupported, Commas(int64(m.MaxContext)))
			continue
		}
		fmt.Fprintf(&b, "  context %9s: full attention %9s entries", Commas(int64(n)), Commas(int64(n)))
		for i, g := range Attended(c, n) {
			sep := ", "
			if i == 0 {
				sep = "; "
			}
			switch g.Attn {
			case deepseekv4.CSA:
				fmt.Fprintf(&b, "%s%s layers %3s (indexer scores %7s)", sep, g.Label, Commas(int64(g.Entries)), Commas(int64(g.Scored)))
			case deepseekv4.HCA:
				fmt.Fprintf(&b, "%s%s layers %5s", sep, g.Label, Commas(int64(g.Entries)))
			default:
				fmt.Fprintf(&b, "%swindow-only layers %d", sep, g.Entries)
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// sortedRates returns the keys of m in increasing order.
func sortedRates(m map[int]int) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
