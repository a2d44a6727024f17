package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version describes this build: the module version (or "(devel)" for a
// build from a checkout), the VCS revision and time when Go recorded them,
// and the Go toolchain and platform.
func version() string {
	v, rev, when, dirty := "(devel)", "", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	out := "strata " + v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		out += " " + rev
		if dirty {
			out += "+modified"
		}
		if when != "" {
			out += " (" + when + ")"
		}
	}
	return fmt.Sprintf("%s %s %s/%s", out, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func runVersion(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && !isHelp(args[0]) {
		return fmt.Errorf("version takes no arguments")
	}
	fmt.Fprintln(stdout, version())
	return nil
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}
