package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Serve serves h on ln until ctx ends, then shuts down gracefully: it stops
// accepting connections, lets the requests in flight (streams included)
// finish for up to drain (0: as long as they take), and then closes the
// connections that remain, which cancels their requests. It returns nil
// after a shutdown, or the error that stopped serving before ctx ended.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, drain time.Duration, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: no new connections; draining requests in flight", "drain_timeout", drain)
	sctx := context.Background()
	if drain > 0 {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(sctx, drain)
		defer cancel()
	}
	start := time.Now()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("drain timed out; closing the remaining connections", "after", time.Since(start).Round(time.Millisecond), "err", err)
		srv.Close()
	} else {
		log.Info("drained", "after", time.Since(start).Round(time.Millisecond))
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
