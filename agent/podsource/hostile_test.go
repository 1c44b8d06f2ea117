package podsource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/manifest"
)

// Files that are not bounded regular files are refused at once with a clear error, a good manifest
// beside them still applies, and the source still stops when told to.
func TestManifestDirSourceRefusesHostileFiles(t *testing.T) {
	tests := []struct {
		name, file string
		make       func(t *testing.T, path string)
		want       error
	}{
		{"symlink to /dev/zero", "zero.yaml", func(t *testing.T, p string) {
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
		}, manifest.ErrNotRegularFile},
		{"fifo", "fifo.yaml", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, manifest.ErrNotRegularFile},
		{"oversized", "big.yaml", func(t *testing.T, p string) {
			line := "# " + strings.Repeat("x", 1021) + "\n"
			writeFile(t, p, strings.Repeat(line, manifest.MaxSize/len(line)+1))
		}, manifest.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.make(t, filepath.Join(dir, tt.file))
			writeFile(t, filepath.Join(dir, "good.yaml"), fmt.Sprintf(podYAML, "good", "busybox:1"))
			r := &recorder{ch: make(chan struct{}, 10)}
			l := newErrorLog()
			stop := runDirSource(t, dir, r, l)
			r.waitFor(t, "the good pod", onlyGood)
			if err := l.waitFor(t, tt.file); !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}

			// A manifest added later still applies: the hostile file did not wedge the source.
			writeFile(t, filepath.Join(dir, "later.yaml"), fmt.Sprintf(podYAML, "later", "busybox:1"))
			r.waitFor(t, "the later pod", func(p []*v1.Pod) bool { return len(p) == 2 })
			stop()
		})
	}
}

func TestReadManifestFileAcceptsSymlinkToRegularFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real")
	writeFile(t, target, "kind: Pod\n")
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if b, err := manifest.Read(link); err != nil || string(b) != "kind: Pod\n" {
		t.Fatalf("read %q, %v", b, err)
	}
}

func TestManifestURLSourceRefuses(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		timeout time.Duration
		want    error
	}{
		{"endless body", func(w http.ResponseWriter, r *http.Request) {
			chunk := []byte(strings.Repeat("# comment\n", 1000))
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, 0, manifest.ErrTooLarge},
		{"declared too large", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(manifest.MaxSize+1))
			w.WriteHeader(http.StatusOK)
		}, 0, manifest.ErrTooLarge},
		{"server error", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}, 0, ErrHTTPStatus},
		{"not modified", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotModified)
		}, 0, ErrHTTPStatus},
		{"server never answers", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, 50 * time.Millisecond, context.DeadlineExceeded},
		{"invalid pod", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("kind: Pod\nmetadata: {name: evil, uid: ../../decoy}\nspec: {containers: [{name: a, image: b}]}\n"))
		}, 0, manifest.ErrInvalidPod},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			r := &recorder{ch: make(chan struct{}, 10)}
			l := newErrorLog()
			s := &ManifestURLSource{URL: srv.URL, NodeName: "n", Period: time.Hour, Timeout: tt.timeout, Set: r.set,
				Errors: func(_ string, err error) { l.record("url", err) }}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { s.Run(ctx); close(done) }()
			err := l.waitFor(t, "url")
			cancel()
			<-done
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, set := range r.sets {
				if len(set) > 0 {
					t.Fatalf("pods applied from a refused body: %v", names(set))
				}
			}
		})
	}
}
