package nccl

import (
	"fmt"
	"os"
	"strings"
)

// NVLSEnv is the NCCL variable that turns NVLink SHARP (multicast) on or
// off; strata keeps it at 0.
const NVLSEnv = "NCCL_NVLS_ENABLE"

// environ is the process environment as keepNVLSOff sees it.
type environ interface {
	lookup(key string) (string, bool)
	set(key, value string) error
}

// osEnv is the real environment. With purego linked, os.Setenv also sets
// the C library's copy, which NCCL reads.
type osEnv struct{}

func (osEnv) lookup(k string) (string, bool) { return os.LookupEnv(k) }
func (osEnv) set(k, v string) error          { return os.Setenv(k, v) }

// keepNVLSOff sets NCCL_NVLS_ENABLE=0 unless it already is, and refuses
// any other value: NVLink multicast must stay off on the machines strata
// runs on.
func keepNVLSOff(env environ) error {
	if v, ok := env.lookup(NVLSEnv); ok {
		if strings.TrimSpace(v) == "0" {
			return nil
		}
		return fmt.Errorf("nccl: %s=%q: strata keeps NVLink multicast off; unset it or set it to 0", NVLSEnv, v)
	}
	if err := env.set(NVLSEnv, "0"); err != nil {
		return fmt.Errorf("nccl: setting %s=0: %w", NVLSEnv, err)
	}
	return nil
}
