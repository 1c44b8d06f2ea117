package server

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestLimitBody checks both ways a body is stopped: declared too large (refused before the
// handler runs) and sent chunked (cut while the handler reads it).
func TestLimitBody(t *testing.T) {
	const limit = 16
	tests := []struct {
		name        string
		body        string
		chunked     bool
		wantCode    int
		wantHandler bool
		wantReadErr bool
	}{
		{name: "small", body: "hello", wantCode: http.StatusOK, wantHandler: true},
		{name: "declared too large", body: strings.Repeat("x", limit+1), wantCode: http.StatusRequestEntityTooLarge},
		{name: "chunked too large", body: strings.Repeat("x", 4*limit), chunked: true, wantCode: http.StatusRequestEntityTooLarge, wantHandler: true, wantReadErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			called, readErr := false, error(nil)
			h := limitBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				called = true
				if _, readErr = io.ReadAll(r.Body); readErr != nil {
					var mbe *http.MaxBytesError
					if errors.As(readErr, &mbe) {
						tooLarge(w, mbe.Limit)
						return
					}
				}
			}), limit)
			req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(tc.body))
			if tc.chunked {
				req.ContentLength = -1
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.wantCode || called != tc.wantHandler || (readErr != nil) != tc.wantReadErr {
				t.Fatalf("code %d, handler called %v, read error %v", rec.Code, called, readErr)
			}
		})
	}
}

// TestLimitBodyKeepsNoBody: the stream proxy writes the request on to the runtime, and a body
// that is not http.NoBody would be sent chunked into the upgraded connection.
func TestLimitBodyKeepsNoBody(t *testing.T) {
	var got io.ReadCloser
	h := limitBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Body }), 16)
	req := httptest.NewRequest(http.MethodPost, "/exec/ns/pod/c", nil)
	req.Body = http.NoBody
	h.ServeHTTP(httptest.NewRecorder(), req)
	if got != http.NoBody {
		t.Fatalf("body %T, want http.NoBody", got)
	}
}
