package server

import (
	"context"
	"errors"
	"net/http"
)

// errShuttingDown is the cause of a generation Abort ended.
var errShuttingDown = errors.New("the server is shutting down")

// Abort ends every generation in flight, and every one started later: its
// engine requests are cancelled and its response ends with an error (a 503
// body, or for a stream an error event after a final chunk that carries a
// finish reason), rather than with a closed connection. Serve calls it when
// the drain timeout expires, before it closes the connections that remain.
// Abort does not wait; it is safe to call more than once.
func (s *Server) Abort() { s.abort() }

// genContext is the context of one HTTP request's generation: it ends when
// the client goes away (r's context) or when Abort is called, the latter
// with cause errShuttingDown. stop releases it.
func (s *Server) genContext(r *http.Request) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(r.Context())
	unhook := context.AfterFunc(s.aborted, func() { cancel(errShuttingDown) })
	return ctx, func() {
		unhook()
		cancel(context.Canceled)
	}
}

// shuttingDown reports whether ctx, made by genContext, ended because of
// Abort.
func shuttingDown(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errShuttingDown)
}

// shutdownError is what a request cut by Abort is told.
func shutdownError() *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: typeOverloaded, Code: "shutting_down",
		Message: "The server is shutting down and stopped this generation before it finished; retry on another server or later."}
}
