package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/strata-inference/strata/plan"
	"github.com/strata-inference/strata/safetensors"
)

func runInspect(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: strata inspect DIR\n\nSummarizes the checkpoint in DIR, of any architecture this build runs (%s):\nits family, the shape of its layers, parameters and bytes by stored dtype, and\ncache bytes per token and per request. It also binds the weights and reports\nevery problem it finds.\n", strings.Join(registry().Architectures(), ", "))
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("want one checkpoint folder")
	}
	dir := fs.Arg(0)
	arch, err := registry().Lookup(dir)
	if err != nil {
		return err
	}
	if arch.Describe == nil {
		return fmt.Errorf("inspect: the %s architecture has no summary", arch.Name)
	}
	sum, err := arch.Describe(filepath.Join(dir, "config.json"))
	if err != nil {
		return err
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return err
	}
	defer ck.Close()
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	defer w.Flush()

	fmt.Fprintf(w, "%s: %s\n", dir, sum.Family)
	for _, f := range sum.Fields {
		indent := "  "
		if f.Sub {
			indent = "    "
		}
		fmt.Fprintf(w, "%s%s\t%s\n", indent, f.Key, f.Value)
	}

	// Parameters and bytes by stored dtype. Packed FP4 (I8/U8 with a .scale
	// companion) holds two parameters per byte; scale tensors are counted apart.
	type tally struct{ params, bytes int64 }
	by := map[string]*tally{}
	names := ck.Names()
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	var total tally
	for _, n := range names {
		t, _ := ck.Tensor(n)
		key := string(t.DType)
		params := int64(t.NumElements())
		switch {
		case strings.HasSuffix(n, ".scale") || strings.HasSuffix(n, "_scale_inv"):
			if has[strings.TrimSuffix(n, ".scale")+".weight"] {
				key = "scales (" + key + ")"
			}
		case (t.DType == "I8" || t.DType == "U8") && has[strings.TrimSuffix(n, ".weight")+".scale"]:
			key = "FP4 e2m1 (packed in " + string(t.DType) + ")"
			params *= 2
		}
		if by[key] == nil {
			by[key] = &tally{}
		}
		by[key].params += params
		by[key].bytes += int64(len(t.Data))
		if !strings.HasPrefix(key, "scales") {
			total.params += params
		}
		total.bytes += int64(len(t.Data))
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return by[keys[i]].bytes > by[keys[j]].bytes })
	fmt.Fprintf(w, "  parameters\t%s in %d tensors, %s on disk\n", humanCount(total.params), len(names), plan.HumanBytes(total.bytes))
	for _, k := range keys {
		fmt.Fprintf(w, "    %s\t%s params, %s\n", k, humanCount(by[k].params), plan.HumanBytes(by[k].bytes))
	}

	for _, c := range sum.Caches {
		specs, err := sum.CacheSpecs(c.DType)
		if err != nil {
			return err
		}
		var perTok float64
		var fixed int64
		for _, s := range specs {
			perTok += s.BytesPerToken()
			if !s.Growing() {
				fixed += s.Bytes(0)
			}
		}
		fmt.Fprintf(w, "  cache (%s)\t%.1f bytes per token, %s fixed per request, %s\n", c.DType, perTok, plan.HumanBytes(fixed), c.Note)
	}
	if sum.Bind == nil {
		fmt.Fprintf(w, "  weights\tnot checked (%s cannot bind them apart from loading)\n", sum.Family)
		return nil
	}
	if err := sum.Bind(ck); err != nil {
		fmt.Fprintf(w, "  weights\tPROBLEMS: %v\n", err)
		return errFailed
	}
	fmt.Fprintf(w, "  weights\tall %d tensors bound\n", len(names))
	return nil
}

func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
