package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Aborter is a handler that can end its requests in flight with a proper
// error response (Server is one).
type Aborter interface {
	Abort()
}

// abortGrace bounds how long aborted handlers have to write their last
// bytes before their connections are closed.
const abortGrace = 10 * time.Second

// Serve serves h on ln until ctx ends, then shuts down gracefully: it stops
// accepting connections and lets the requests in flight (streams included)
// finish for up to drain (0: as long as they take). Then, if h is an
// Aborter, it aborts the requests that remain, which end their responses
// with an error (up to abortGrace), and closes the connections still open,
// which cancels their requests. It returns nil after a shutdown, or the
// error that stopped serving before ctx ended.
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
		if a, ok := h.(Aborter); ok {
			// Let the handlers end their responses properly first: a
			// stream gets its finish reason and an error event, a
			// non-streaming request a 503 body.
			log.Warn("drain timed out; ending the generations in flight", "after", time.Since(start).Round(time.Millisecond))
			a.Abort()
			gctx, cancel := context.WithTimeout(context.Background(), abortGrace)
			err = srv.Shutdown(gctx)
			cancel()
		}
		if err != nil && !errors.Is(err, net.ErrClosed) {
			log.Warn("closing the remaining connections", "after", time.Since(start).Round(time.Millisecond), "err", err)
			srv.Close()
		}
	} else {
		log.Info("drained", "after", time.Since(start).Round(time.Millisecond))
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
