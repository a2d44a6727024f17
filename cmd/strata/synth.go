package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/strata-inference/strata/model/deepseekv4"
	"github.com/strata-inference/strata/model/gemma4"
	"github.com/strata-inference/strata/safetensors"
)

// runSynth writes a random-weight checkpoint of a config in the released
// format, for benchmarks and side-by-side runs on shapes no shipped model
// has.
func runSynth(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	config := fs.String("config", "", "config.json of the model to write (DeepSeek-V4 Hub style, or Gemma 4 in either spelling)")
	out := fs.String("out", "", "folder to write (created; must not exist)")
	seed := fs.Uint64("seed", 1, "seed of the random weights")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: strata synth -config config.json -out DIR [-seed N]

Writes a checkpoint with random weights and the config into a new folder,
sharded safetensors with an index: DeepSeek-V4 in the released format (FP8
e4m3 with 128x128 UE8M0 scales, FP4 e2m1 experts with per-32 UE8M0 scales,
bf16 embeddings, head and compressors); Gemma 4 (chosen by its model_type) in
bf16, in the naming its config's spelling loads.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *config == "" || *out == "" {
		fs.Usage()
		return fmt.Errorf("-config and -out are required")
	}
	b, err := os.ReadFile(*config)
	if err != nil {
		return err
	}
	if _, err := os.Stat(*out); err == nil {
		return fmt.Errorf("%s exists; give a new folder", *out)
	}
	t0 := time.Now()
	tmp := *out + ".partial"
	os.RemoveAll(tmp)
	write := deepseekv4.WriteSynthetic
	var probe struct {
		ModelType string `json:"model_type"`
	}
	if json.Unmarshal(b, &probe) == nil && strings.HasPrefix(probe.ModelType, "gemma4") {
		write = func(dir string, cfg []byte, seed uint64) error {
			return gemma4.WriteSynthetic(dir, cfg, safetensors.BF16, seed)
		}
	}
	if err := write(tmp, b, *seed); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, *out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s in %s\n", *out, time.Since(t0).Round(time.Millisecond))
	return nil
}
