package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodelet/nodelet/agent/server"
	"github.com/nodelet/nodelet/test/harness/apitest"
)

func serveLogs(t *testing.T, dir string) func(path string, header ...string) (int, string) {
	f := apitest.NewFixture(t)
	s := server.New(server.Deps{NodeName: "node1", Pods: f.Pods, Runtime: f.Runtime, NodeLogDir: dir})
	return func(path string, header ...string) (int, string) {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "http://node1"+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
}

// /logs/ serves the log folder as the kubelet does (listings, files, ranges), and nothing outside
// it: no "..", no symlink leading out, no FIFO or device, however the path is spelt.
func TestNodeLogsStayInTheirFolder(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "log")
	outside := filepath.Join(top, "secret")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "app"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "messages"), []byte("boot ok\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "app", "app.log"), []byte("0123456789"), 0o644))
	must(os.WriteFile(outside, []byte("do not serve"), 0o600))
	must(os.Symlink("app/app.log", filepath.Join(dir, "current")))
	must(os.Symlink(outside, filepath.Join(dir, "escape")))
	must(os.Symlink("../secret", filepath.Join(dir, "escape-relative")))
	must(os.Symlink(top, filepath.Join(dir, "escape-dir")))
	must(os.Symlink("/dev/zero", filepath.Join(dir, "zero")))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	get := serveLogs(t, dir)

	if code, body := get("/logs/"); code != 200 || !strings.Contains(body, `<a href="messages">messages</a>`) ||
		!strings.Contains(body, `<a href="app/">app/</a>`) {
		t.Fatalf("/logs/: %d %q", code, body)
	}
	if code, body := get("/logs/messages"); code != 200 || body != "boot ok\n" {
		t.Fatalf("/logs/messages: %d %q", code, body)
	}
	if code, body := get("/logs/app/"); code != 200 || !strings.Contains(body, `<a href="app.log">app.log</a>`) {
		t.Fatalf("/logs/app/: %d %q", code, body)
	}
	if code, body := get("/logs/current", "Range", "bytes=2-5"); code != http.StatusPartialContent || body != "2345" {
		t.Fatalf("a range through a symlink inside the folder: %d %q", code, body)
	}
	if code, _ := get("/logs/nosuch"); code != http.StatusNotFound {
		t.Fatalf("/logs/nosuch: %d", code)
	}
	for _, p := range []string{"/logs/escape", "/logs/escape-relative", "/logs/escape-dir/secret", "/logs/escape-dir/",
		"/logs/zero", "/logs/fifo", "/logs/../secret", "/logs/%2e%2e/secret", "/logs/app/%2e%2e/%2e%2e/secret", "/logs/..%2fsecret"} {
		code, body := get(p)
		if code == 200 || strings.Contains(body, "do not serve") {
			t.Errorf("%s: %d %q: served what is outside the folder or not a regular file", p, code, body)
		}
	}
}

func TestNodeLogsListingIsBounded(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "many")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 10001 {
		f, err := os.Create(filepath.Join(big, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	get := serveLogs(t, dir)
	if code, body := get("/logs/many/"); code != http.StatusInternalServerError {
		t.Fatalf("a listing of 10001 entries: %d (%d bytes)", code, len(body))
	}
	if code, _ := get("/logs/many/17"); code != 200 {
		t.Fatalf("a file of the big folder: %d", code)
	}
}

// enableSystemLogHandler false: the kubelet's answer.
func TestNodeLogsDisabled(t *testing.T) {
	get := serveLogs(t, "")
	if code, body := get("/logs/messages"); code != http.StatusMethodNotAllowed || body != "logs endpoint is disabled.\n" {
		t.Fatalf("disabled /logs/: %d %q", code, body)
	}
}
