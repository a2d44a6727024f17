// Command strata is the one binary of the strata inference engine: it serves,
// generates, plans capacity, inspects checkpoints and checks golden data.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand. run gets the arguments after the subcommand name.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"plan":         {"capacity planner: cache bytes per token and per request, concurrency in a memory budget", runPlan},
		"check-golden": {"check a model against reference logits along every path (full, decode, chunked, greedy)", runCheckGolden},
		"inspect":      {"summarize a checkpoint: architecture, layer kinds, parameters by dtype, cache bytes", runInspect},
		"generate":     {"generate tokens from a prompt with a local model", runGenerate},
		"perplexity":   {"perplexity of a text file under a model, to judge quantization", runPerplexity},
		"serve":        {"serve a model over an OpenAI-compatible HTTP API (chat, completions, models, health, metrics)", runServe},
		"bench":        {"benchmarks: 'bench serve' runs a bounded load of streaming clients against strata serve", runBench},
		"synth":        {"write a random-weight checkpoint of a config in the released format", runSynth},
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: strata <command> [flags] [args]\n\ncommands:\n")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-14s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintf(w, "\nRun 'strata <command> -h' for a command's flags.\n")
}

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage(os.Stdout)
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	cmd, ok := commands()[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "strata: unknown command %q\n\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.run(ctx, os.Args[2:], os.Stdout); err != nil {
		if err == errFailed {
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "strata %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// errFailed reports a failure the command has already explained on its output.
var errFailed = fmt.Errorf("failed")
