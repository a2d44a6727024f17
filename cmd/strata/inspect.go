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

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model/deepseekv4"
	"github.com/strata-inference/strata/plan"
	"github.com/strata-inference/strata/safetensors"
)

func runInspect(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: strata inspect DIR\n\nSummarizes the DeepSeek-V4 checkpoint in DIR: architecture, the kind of every\nlayer, parameters and bytes by stored dtype, and cache bytes per token and per\nrequest. It also binds the weights and reports every problem it finds.\n")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("want one checkpoint folder")
	}
	dir := fs.Arg(0)
	cfg, err := deepseekv4.LoadConfig(filepath.Join(dir, "config.json"))
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

	fmt.Fprintf(w, "%s: DeepSeek-V4\n", dir)
	fmt.Fprintf(w, "  hidden\t%d, %d hc streams (Sinkhorn %d iterations)\n", cfg.Hidden, cfg.HCMult, cfg.SinkhornIters)
	fmt.Fprintf(w, "  attention\t%d heads of %d (last %d RoPE), one shared kv head, q rank %d, output %d groups of rank %d\n",
		cfg.Heads, cfg.HeadDim, cfg.RopeDim, cfg.QLoraRank, cfg.OGroups, cfg.OLoraRank)
	fmt.Fprintf(w, "  window\t%d tokens; indexer %d heads of %d, top %d\n", cfg.Window, cfg.IndexHeads, cfg.IndexHeadDim, cfg.IndexTopK)
	fmt.Fprintf(w, "  moe\t%d of %d experts of %d (+1 shared), %s scoring, scale %g, SwiGLU limit %g\n",
		cfg.ExpertsPerTok, cfg.Experts, cfg.MoEInter, cfg.Scoring, cfg.RoutedScale, cfg.SwigluLimit)
	rope := fmt.Sprintf("main theta %g; compressed theta %g", cfg.RopeTheta, cfg.CompressRopeTheta)
	if y := cfg.Yarn; y != nil {
		rope += fmt.Sprintf(" with YaRN x%g over %g (beta %g/%g)", y.Factor, y.OriginalMax, y.BetaFast, y.BetaSlow)
	}
	fmt.Fprintf(w, "  rope\t%s\n", rope)
	fmt.Fprintf(w, "  vocab\t%d (bos %d, eos %d), max context %d\n", cfg.VocabSize, cfg.BOS, cfg.EOS, cfg.MaxPosition)
	quant := "none (unquantized weights)"
	if cfg.FP8Block != nil {
		quant = fmt.Sprintf("FP8 e4m3, UE8M0 scales per %dx%d block", cfg.FP8Block[0], cfg.FP8Block[1])
		if cfg.ExpertDType != "" {
			quant += "; experts " + cfg.ExpertDType
		}
	}
	fmt.Fprintf(w, "  quantization\t%s\n", quant)
	fmt.Fprintf(w, "  layers\t%d, %s\n", len(cfg.Layers), layerSummary(cfg))
	for i, l := range cfg.Layers {
		route := "learned routing"
		if l.Hash {
			route = "hash routing"
		}
		kind := "window only"
		switch l.Attn {
		case deepseekv4.CSA:
			kind = fmt.Sprintf("CSA, rate %d, indexer", l.Rate)
		case deepseekv4.HCA:
			kind = fmt.Sprintf("HCA, rate %d", l.Rate)
		}
		fmt.Fprintf(w, "    %d\t%s, %s\n", i, kind, route)
	}
	if len(cfg.MTP) > 0 {
		fmt.Fprintf(w, "  mtp\t%d layer(s), window only\n", len(cfg.MTP))
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

	for _, dt := range []cache.DType{cache.F32, cache.FP8} {
		specs := cfg.CacheSpecs(dt)
		var perTok float64
		var fixed int64
		for _, s := range specs {
			perTok += s.BytesPerToken()
			if !s.Growing() {
				fixed += s.Bytes(0)
			}
		}
		what := "as strata's CPU engine stores it"
		if dt == cache.FP8 {
			what = "in the released FP8 layout"
		}
		fmt.Fprintf(w, "  cache (%s)\t%.1f bytes per token, %s fixed per request, %s\n", dt, perTok, plan.HumanBytes(fixed), what)
	}
	if _, err := deepseekv4.Bind(cfg, ck); err != nil {
		fmt.Fprintf(w, "  weights\tPROBLEMS: %v\n", err)
		return errFailed
	}
	fmt.Fprintf(w, "  weights\tall %d tensors bound\n", len(names))
	return nil
}

func layerSummary(cfg *deepseekv4.Config) string {
	counts := map[string]int{}
	var order []string
	hash := 0
	for _, l := range cfg.Layers {
		k := "window-only"
		switch l.Attn {
		case deepseekv4.CSA:
			k = fmt.Sprintf("CSA rate %d", l.Rate)
		case deepseekv4.HCA:
			k = fmt.Sprintf("HCA rate %d", l.Rate)
		}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
		if l.Hash {
			hash++
		}
	}
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	return fmt.Sprintf("%s; %d hash-routed", strings.Join(parts, ", "), hash)
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
