package plan

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxLength bounds the context lengths ParseLength accepts (2^40 tokens), so
// byte counts stay far inside int64.
const MaxLength = 1 << 40

// ParseLength reads a context length in tokens: a whole number, optionally
// with a 1024-based suffix K or M (either case), as the handbook writes
// lengths: "4096", "4K", "128K", "1M", "1.5M". The result must be a positive
// whole number of tokens no larger than MaxLength.
func ParseLength(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	switch {
	case strings.HasSuffix(t, "K"), strings.HasSuffix(t, "k"):
		mult, t = 1024, t[:len(t)-1]
	case strings.HasSuffix(t, "M"), strings.HasSuffix(t, "m"):
		mult, t = 1024*1024, t[:len(t)-1]
	}
	t = strings.ReplaceAll(t, "_", "")
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || t == "" || strings.ContainsAny(t, "eEnNiIxXpP") {
		return 0, fmt.Errorf("context length %q: want a number of tokens such as 4096, 128K or 1M", s)
	}
	n := v * mult
	switch {
	case !(n > 0):
		return 0, fmt.Errorf("context length %q: must be positive", s)
	case n > MaxLength:
		return 0, fmt.Errorf("context length %q: exceeds %d tokens", s, MaxLength)
	case n != math.Trunc(n):
		return 0, fmt.Errorf("context length %q: %g is not a whole number of tokens", s, n)
	}
	return int(n), nil
}

// ParseLengths reads a comma-separated list of ParseLength values
// ("4K,128K,1M"); empty entries are an error.
func ParseLengths(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := ParseLength(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// ParseBytes reads a memory size: a number with an optional unit. KB, MB,
// GB and TB are powers of 1000; KiB, MiB, GiB and TiB, and the bare K, M,
// G and T, are powers of 1024; B or no unit is bytes. Units are
// case-insensitive: "80GiB", "141GB", "80g", "1.5TiB". The result must be
// positive and fit an int64.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r == '.' || r == '_')
	})
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	units := map[string]float64{
		"": 1, "b": 1,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
		"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
	}
	mult, ok := units[strings.ToLower(unit)]
	if !ok {
		return 0, fmt.Errorf("memory size %q: unknown unit %q (want B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)", s, unit)
	}
	num = strings.ReplaceAll(num, "_", "")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("memory size %q: want a number with a unit such as 80GiB or 141GB", s)
	}
	b := math.Floor(v * mult)
	switch {
	case !(b >= 1):
		return 0, fmt.Errorf("memory size %q: must be at least one byte", s)
	case b >= math.MaxInt64:
		return 0, fmt.Errorf("memory size %q: too large", s)
	}
	return int64(b), nil
}

// HumanBytes formats b in 1024-based units with an unambiguous suffix
// ("512 B", "4.35 MiB", "1.37 GiB").
func HumanBytes(b int64) string {
	switch {
	case b < KB:
		return fmt.Sprintf("%d B", b)
	case b < MB:
		return fmt.Sprintf("%.2f KiB", float64(b)/KB)
	case b < GB:
		return fmt.Sprintf("%.2f MiB", float64(b)/MB)
	}
	return fmt.Sprintf("%.2f GiB", float64(b)/GB)
}

// ShortLength formats a context length the way ParseLength reads it: "4K",
// "128K", "1M" when it is a whole number of K or M, else with commas.
func ShortLength(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return Commas(int64(n))
}
