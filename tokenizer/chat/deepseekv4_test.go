package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenCase loads testdata/deepseek-v4/input_N.json and output_N.txt,
// copies of ../shared/golden/deepseek-v4-chat. Input 1 is {messages, tools};
// the others are a bare message list.
func goldenCase(t *testing.T, n string) (msgs []Message, tools []Tool, want string) {
	t.Helper()
	in, err := os.ReadFile(filepath.Join("testdata", "deepseek-v4", "input_"+n+".json"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(filepath.Join("testdata", "deepseek-v4", "output_"+n+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(strings.TrimSpace(string(in)), "{") {
		var c struct {
			Messages []Message `json:"messages"`
			Tools    []Tool    `json:"tools"`
		}
		if err := json.Unmarshal(in, &c); err != nil {
			t.Fatal(err)
		}
		return c.Messages, c.Tools, string(out)
	}
	if err := json.Unmarshal(in, &msgs); err != nil {
		t.Fatal(err)
	}
	return msgs, nil, string(out)
}

func TestEncodeDeepSeekV4Golden(t *testing.T) {
	for _, tc := range []struct {
		name, n  string
		thinking bool
	}{
		{"tools on the system message, thinking", "1", true},
		{"earlier reasoning dropped, thinking", "2", true},
		{"developer with tools and latest_reminder, thinking", "3", true},
		{"quick instruction task and latest_reminder, chat", "4", false},
	} {
		t.Run(tc.n, func(t *testing.T) {
			msgs, tools, want := goldenCase(t, tc.n)
			got, err := EncodeDeepSeekV4(msgs, tools, Options{Thinking: tc.thinking})
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s: prompt differs at byte %d\n got: %q\nwant: %q", tc.name, firstDiff(got, want), got, want)
			}
		})
	}
}

func firstDiff(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
