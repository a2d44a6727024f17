package main

import (
	"context"
	"fmt"
	"io"
)

func runPlan(ctx context.Context, args []string, stdout io.Writer) error {
	return fmt.Errorf("not implemented yet")
}
