package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/plan"
)

// listFlag collects a repeatable flag whose values may also be comma lists.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			return fmt.Errorf("empty entry in %q", s)
		}
		*l = append(*l, f)
	}
	return nil
}

// pathFlag collects a repeatable flag whose values are taken whole (paths
// may contain commas).
type pathFlag []string

func (p *pathFlag) String() string { return strings.Join(*p, " ") }

func (p *pathFlag) Set(s string) error {
	if s == "" {
		return fmt.Errorf("empty path")
	}
	*p = append(*p, s)
	return nil
}

// runPlan is `strata plan`: the capacity planner. With no flags it prints the
// handbook's KV ledger for every preset; choosing models (--model, --config)
// or lengths and a budget (--context, --budget) adds each model's cache
// kinds, exact bytes and pages per request and the concurrency in the budget.
func runPlan(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("strata plan", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned once; -h prints to stdout
	var models listFlag
	var configs pathFlag
	dtype := fs.String("cache-dtype", "", "cache `dtype` for --config inputs and the DeepSeek-V4 and V3.2 presets: f32 (what strata's CPU engine stores; the default for --config), bf16, or fp8 (DeepSeek's FP8 layouts, the handbook's assumption; the default for those presets). Compressor state is always f32. The other presets have fixed dtypes and reject this flag")
	contexts := fs.String("context", "4K,128K,1M", "comma-separated context `lengths` in tokens for the per-request table and --attended (K = 1024, M = 1048576)")
	budget := fs.String("budget", "", "memory `size` for the concurrency columns: how many requests of each length fit (80GiB, 141GB, 512MiB; GB = 10^9 bytes, GiB and bare G = 2^30)")
	pageBytes := fs.Int("page-bytes", plan.DefaultPageBytes, "pool page size in `bytes` that page counts and page-based concurrency use")
	attended := fs.Bool("attended", false, "print the KV entries attended per decode step at each --context length (DeepSeek-V4 models)")
	plotPath := fs.String("plot", "", "write a PNG `file` plotting memory per request against context length (1K to 1M) for the chosen models")
	fs.Var(&models, "model", "preset `name`s, repeatable or comma-separated: "+strings.Join(plan.PresetNames(), ", ")+" (case, spaces, '-', '.' ignored); default: all presets unless --config is given")
	fs.Var(&configs, "config", "`path` of a DeepSeek-V4, DeepSeek-V3.2, GLM-5, Gemma 4 or Qwen3.5 config.json (Hub or transformers spelling, chosen by model_type), repeatable")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: strata plan [flags]

The capacity planner. With no flags it prints the handbook's KV ledger for its
six models: bytes per token, fixed bytes per request, and one request at 128K
and 1M tokens (the handbook's formula, bytes per token x L + fixed, with its
dtype assumptions; KB/MB/GB are 1024-based). Choosing models or giving
--context/--budget adds, per model, its cache kinds and the exact bytes, pages
and concurrency per request (floor(L/rate) slots per growing kind).

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil
		}
		return fmt.Errorf("%w (see strata plan -h)", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (models are chosen with --model or --config)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	lengths, err := plan.ParseLengths(*contexts)
	if err != nil {
		return fmt.Errorf("--context: %w", err)
	}
	var budgetBytes int64
	if set["budget"] {
		if budgetBytes, err = plan.ParseBytes(*budget); err != nil {
			return fmt.Errorf("--budget: %w", err)
		}
	}
	if *pageBytes <= 0 {
		return fmt.Errorf("--page-bytes: %d is not a positive number of bytes", *pageBytes)
	}
	var dt cache.DType
	if set["cache-dtype"] {
		if dt, err = cache.ParseDType(*dtype); err != nil {
			return fmt.Errorf("--cache-dtype: %w", err)
		}
	}

	// Resolve the models: presets first, in the order given, then configs.
	var chosen []plan.Model
	names := []string(models)
	if len(names) == 0 && len(configs) == 0 {
		names = plan.PresetNames()
	}
	for _, n := range names {
		m, err := plan.Preset(n)
		if err != nil {
			return fmt.Errorf("--model: %w", err)
		}
		if set["cache-dtype"] {
			if m, err = plan.PresetFor(m.Name, dt); err != nil {
				return fmt.Errorf("--cache-dtype: %s has fixed dtype assumptions (%s); --cache-dtype applies to the DeepSeek-V4 and DeepSeek-V3.2 presets only", m.Name, m.DTypes)
			}
			if dt != cache.FP8 {
				m.Name += " (" + dt.String() + " cache)"
			}
		}
		chosen = append(chosen, m)
	}
	cfgDType := cache.F32
	if set["cache-dtype"] {
		cfgDType = dt
	}
	for _, p := range configs {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, err := plan.FromConfigFile(p, cfgDType)
		if err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		chosen = append(chosen, m)
	}
	for _, m := range chosen {
		if err := m.Validate(*pageBytes); err != nil {
			return fmt.Errorf("--page-bytes: %w", err)
		}
	}

	var out strings.Builder
	if err := plan.Ledger(&out, chosen); err != nil {
		return err
	}
	if err := plan.Assumptions(&out, chosen); err != nil {
		return err
	}
	if set["model"] || set["config"] || set["context"] || set["budget"] || set["page-bytes"] {
		for _, m := range chosen {
			out.WriteString("\n")
			if err := plan.WriteReport(&out, m, plan.ReportOptions{Lengths: lengths, PageBytes: *pageBytes, Budget: budgetBytes}); err != nil {
				return err
			}
		}
	}
	if *attended {
		var skipped []string
		printed := false
		for _, m := range chosen {
			if m.V4 == nil {
				skipped = append(skipped, m.Name)
				continue
			}
			out.WriteString("\n")
			if err := plan.WriteAttended(&out, m, lengths); err != nil {
				return err
			}
			printed = true
		}
		if !printed {
			return fmt.Errorf("--attended: none of %s is a DeepSeek-V4 model", strings.Join(skipped, ", "))
		}
		if len(skipped) > 0 {
			fmt.Fprintf(&out, "\nattended entries are computed for DeepSeek-V4 models only; skipped %s\n", strings.Join(skipped, ", "))
		}
	}
	if *plotPath != "" {
		if err := writePlot(*plotPath, chosen); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
		fmt.Fprintf(&out, "\nwrote %s\n", *plotPath)
	}
	_, err = io.WriteString(stdout, out.String())
	return err
}

// writePlot writes the plot to path, removing a partial file on failure.
func writePlot(path string, models []plan.Model) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := plan.Plot(f, models); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}
