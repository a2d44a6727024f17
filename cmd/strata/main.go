// Command strata is the one binary of the strata inference engine: it serves,
// generates, plans capacity, inspects checkpoints and checks golden data.
package main

import (
	"context"
	"errors"
	"flag"
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
		"serve":        {"serve a model over HTTP: OpenAI chat, completions and responses, Anthropic messages, tokenize, models, health, metrics", runServe},
		"version":      {"print the build's version (also strata --version)", runVersion},
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := realMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// realMain runs the command args name and returns the exit status: 0 on
// success and when help was asked for (-h on any command), 1 when the
// command failed, 2 for a usage error.
func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch {
	case isHelp(args[0]):
		usage(stdout)
		return 0
	case args[0] == "--version" || args[0] == "-version":
		fmt.Fprintln(stdout, version())
		return 0
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "strata: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	err := cmd.run(ctx, args[1:], stdout)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp): // flag printed the usage
		return 0
	case err == errFailed:
		return 1
	}
	fmt.Fprintf(stderr, "strata %s: %v\n", args[0], err)
	return 1
}

// errFailed reports a failure the command has already explained on its output.
var errFailed = fmt.Errorf("failed")
