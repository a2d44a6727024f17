package cpu

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAsmVZEROUPPER reads the package's assembly: every routine that
// touches a YMM or ZMM register (itself or through a macro) must execute
// VZEROUPPER right before each of its RETs, so that no caller pays the
// AVX-SSE transition penalty or runs with dirty upper halves.
func TestAsmVZEROUPPER(t *testing.T) {
	files, err := filepath.Glob("*_amd64.s")
	if err != nil || len(files) == 0 {
		t.Fatalf("no assembly files: %v", err)
	}
	wide := regexp.MustCompile(`\b[YZ](1[0-9]|2[0-9]|3[01]|[0-9])\b`)
	routines := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Join continued macro lines, then drop comments.
		src := strings.ReplaceAll(string(b), "\\\n", " ")
		var lines []string
		for _, l := range strings.Split(src, "\n") {
			if i := strings.Index(l, "//"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		wideMacro := map[string]bool{}
		for _, l := range lines {
			if rest, ok := strings.CutPrefix(l, "#define "); ok {
				name, body, _ := strings.Cut(rest, "(")
				if wide.MatchString(body) {
					wideMacro[strings.TrimSpace(name)] = true
				}
			}
		}
		touches := func(l string) bool {
			if wide.MatchString(l) {
				return true
			}
			name, _, ok := strings.Cut(l, "(")
			return ok && wideMacro[strings.TrimSpace(name)]
		}
		var name string
		var body []string
		check := func() {
			if name == "" {
				return
			}
			routines++
			uses := false
			for _, l := range body {
				uses = uses || touches(l)
			}
			for i, l := range body {
				if l != "RET" || !uses {
					continue
				}
				if i == 0 || body[i-1] != "VZEROUPPER" {
					t.Errorf("%s: %s uses YMM/ZMM registers and returns without VZEROUPPER", f, name)
				}
			}
		}
		for _, l := range lines {
			if strings.HasPrefix(l, "#") {
				continue
			}
			if strings.HasPrefix(l, "TEXT ") {
				check()
				name, body = strings.Fields(l)[1], nil
				continue
			}
			body = append(body, l)
		}
		check()
	}
	if routines < 30 {
		t.Errorf("read %d routines; the parser has lost some", routines)
	}
	t.Logf("%d routines in %d files", routines, len(files))
}

// TestAxpyAVX2 is TestAxpy for the AVX2 routine, which an AVX-512 machine
// does not otherwise run.
func TestAxpyAVX2(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(51, 52))
	for _, n := range []int{8, 9, 16, 17, 100, 1000} {
		x, y0 := randVec(rng, n), randVec(rng, n)
		want := append([]float32(nil), y0...)
		axpyGo(want, -0.37, x)
		got := append([]float32(nil), y0...)
		m := n &^ 7
		axpyY(&got[0], -0.37, &x[0], m)
		axpyGo(got[m:], -0.37, x[m:])
		for i := range got {
			if !sameFloat(got[i], want[i]) {
				t.Fatalf("n=%d: y[%d] = %v, axpyGo %v", n, i, got[i], want[i])
			}
		}
	}
}
