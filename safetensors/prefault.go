package safetensors

import "context"

// pageSize is the stride at which Prefault touches a mapping; touching one
// byte of every 4 KiB faults in every page, whatever the page size.
const pageSize = 4096

// Prefault reads one byte of every page of every file of the checkpoint, so
// that the first requests a server runs do not pay for faulting its weights
// in (for a checkpoint larger than memory this just streams it through).
// It returns early if ctx ends.
func (c *Checkpoint) Prefault(ctx context.Context) error {
	var sink byte
	for _, f := range c.files {
		for i := 0; i < len(f.mem); i += pageSize {
			if i%(1<<26) == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			sink ^= f.mem[i]
		}
	}
	_ = sink
	return nil
}
