package cuda

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// TestKernelsOpenWithPDLWait: every kernel of the embedded sources opens
// with PDL_WAIT() (its first statement), so that a launch that allows
// programmatic dependent launch (Backend.SetPDL) touches no memory before
// the kernels before it have finished; or, the gemv2/gemv5 entries, with
// PDL_OPEN_EARLY() and straight into gemv_rows (gemv2_body), gemvp_rows or
// gemvxp_body, which read only weights (and their tables) before their
// PDL_WAIT_LATE() (gemvp_fp8_u2s3_chain's claims touch only its own
// counters, which its launch a layer back left zero).
func TestKernelsOpenWithPDLWait(t *testing.T) {
	names, err := fs.Glob(kernelFS, "kernels/*.cu")
	if err != nil || len(names) == 0 {
		t.Fatalf("no kernel sources: %v", err)
	}
	body := regexp.MustCompile(`^\s*(\\\s*)?PDL_WAIT\(\);`)
	early := regexp.MustCompile(`^\s*(\\\s*)?PDL_OPEN_EARLY\(\);[\s\\]*(const int g = blockIdx\.y;[\s\\]*)?(const int pre = threadIdx\.x == 0 \? \(int\)atomicAdd\(ctr \+ 1, 1u\) : 0;\s*)?(const int n = )?(gemv2_body|gemvm_body|gemv_rows|gemvp_rows|gemvh_rows|gemvxp_body|moeq_body)<|^\s*PDL_OPEN_EARLY\(\);\s*hc_post_pre_body\(|^[\s\\]*moeq_body<PT, 2, 2, S>\(`)
	common, err := kernelFS.ReadFile("kernels/gemv_common.cuh")
	if err != nil {
		t.Fatal(err)
	}
	rows := string(common)[strings.Index(string(common), "__device__ __forceinline__ void gemv_rows("):]
	if w, l := strings.Index(rows, "PDL_WAIT_LATE();"), strings.Index(rows, "x + (long long)"); w < 0 || l < 0 || w > l {
		t.Error("gemv_rows does not wait (PDL_WAIT_LATE) before it reads its activations")
	}
	// Each early body's first read of what a launch before it writes: the
	// products' activations, hc_post_pre's streams.
	for _, f := range [][3]string{{"gemvp.cu", "gemvp_rows", "x0 + (long long)"}, {"gemvh.cu", "gemvh_rows", "x0 + (long long)"},
		{"gemvx.cu", "gemvxp_body", "x0 + (long long)"}, {"model.cu", "hc_post_pre_body", "ht["}} {
		src, err := kernelFS.ReadFile("kernels/" + f[0])
		if err != nil {
			t.Fatal(err)
		}
		// Its definition, whatever it returns.
		def := regexp.MustCompile(`__device__ __forceinline__ \w+ ` + f[1] + `\(`).FindStringIndex(string(src))
		if def == nil {
			t.Fatalf("%s: no definition of %s", f[0], f[1])
		}
		body := string(src)[def[0]:]
		if w, l := strings.Index(body, "PDL_WAIT_LATE();"), strings.Index(body, f[2]); w < 0 || l < 0 || w > l {
			t.Errorf("%s does not wait (PDL_WAIT_LATE) before it reads what launches before it write", f[1])
		}
	}
	moe, err := kernelFS.ReadFile("kernels/moe.cu")
	if err != nil {
		t.Fatal(err)
	}
	mq := string(moe)[strings.Index(string(moe), "__device__ __forceinline__ void moeq_body("):]
	// moeq_body (moe_down's entries open early, moe_gateup's straight into
	// it): early 1 waits before it stages the activations, 0 and 2 before
	// they read the routing and let the next kernel launch only after it.
	w0, o0, w1, c, st := strings.Index(mq, "if (early != 1) PDL_WAIT_LATE();"), strings.Index(mq, "if (early != 1) PDL_OPEN_EARLY();"),
		strings.Index(mq, "if (early == 1) PDL_WAIT_LATE();"), strings.Index(mq, "__ldcg(chunks"), strings.Index(mq, "if (early != 2) moeq_stage(xq")
	if w0 < 0 || o0 < w0 || w1 < 0 || c < o0 || st < w1 {
		t.Error("moeq_body does not wait (PDL_WAIT_LATE) before it reads the routing (or, early, its activations)")
	}
	total := 0
	for _, name := range names {
		b, err := kernelFS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		for off := 0; ; {
			i := strings.Index(src[off:], "__global__")
			if i < 0 {
				break
			}
			i += off
			// The parameter list: the parentheses after the name
			// (__launch_bounds__'s first), then the body's brace.
			j := i
			for k := 0; k < 2; k++ {
				open := strings.IndexByte(src[j:], '(')
				if open < 0 {
					t.Fatalf("%s: kernel at byte %d without parameters", name, i)
				}
				j += open
				depth := 0
				for ; ; j++ {
					if src[j] == '(' {
						depth++
					} else if src[j] == ')' {
						depth--
						if depth == 0 {
							j++
							break
						}
					}
				}
				if k == 0 && !strings.Contains(src[i:j], "__launch_bounds__") {
					break
				}
			}
			brace := strings.IndexByte(src[j:], '{')
			if brace < 0 {
				t.Fatalf("%s: kernel at byte %d without a body", name, i)
			}
			if !body.MatchString(src[j+brace+1:]) && !early.MatchString(src[j+brace+1:]) {
				end := min(len(src), j+brace+80)
				t.Errorf("%s: kernel does not open with PDL_WAIT(): %q", name, src[i:end])
			}
			total++
			off = j + brace
		}
	}
	if total < 40 {
		t.Errorf("found %d kernels, expected more", total)
	}
	t.Logf("%d kernels open with PDL_WAIT", total)
}
