package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Error types, as OpenAI's API names them.
const (
	typeInvalidRequest = "invalid_request_error"
	typeNotFound       = "not_found_error"
	typeServer         = "server_error"
	typeOverloaded     = "overloaded_error"
)

// apiError is an error a request gets back: the HTTP status and the fields of
// OpenAI's error object. Param names the request field at fault ("" when
// none), Code is a machine-readable reason ("" when none).
type apiError struct {
	Status  int
	Message string
	Type    string
	Param   string
	Code    string
}

func (e *apiError) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("%d %s (%s): %s", e.Status, e.Type, e.Param, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message)
}

// errorBody is the JSON body of an error response.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) body() errorBody {
	b := errorBody{Error: errorObject{Message: e.Message, Type: e.Type}}
	if e.Param != "" {
		b.Error.Param = &e.Param
	}
	if e.Code != "" {
		b.Error.Code = &e.Code
	}
	return b
}

// invalidf is a 400 error about the request field param.
func invalidf(param, code, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: param, Code: code, Message: fmt.Sprintf(format, args...)}
}

// unsupported is a 400 error for a field or value this server does not
// implement.
func unsupported(param, format string, args ...any) *apiError {
	return invalidf(param, "unsupported_value", format, args...)
}

func modelNotFound(name, served string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("The model %q does not exist; this server serves %q (GET /v1/models lists it).", name, served)}
}

func overloaded(retryAfter int) *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: typeOverloaded, Code: "queue_full",
		Message: "The server's request queue is full; retry after " + strconv.Itoa(retryAfter) + "s."}
}

func internalf(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusInternalServerError, Type: typeServer, Message: fmt.Sprintf(format, args...)}
}

// writeError sends e as a JSON error response.
func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, e.body())
}

// writeJSON sends v as a JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data, _ = json.Marshal(internalf("encoding the response: %v", err).body())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)+1))
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}
