package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"

	"golang.org/x/sys/unix"
)

// maxListedEntries bounds a /logs/ directory listing: the file server reads a whole directory into
// memory to sort it, and a folder of the host's may hold any number of files.
const maxListedEntries = 10000

// nodeLogs serves dir (the host's /var/log) under /logs/ as the kubelet's system log handler does:
// a directory as its listing, a file as its content (with ranges and conditional requests, by the
// standard file server). Unlike the kubelet's, whose plain file server follows any symlink, what
// is served never leaves dir: every name is resolved inside it (no "..", no symlink out of it),
// only directories and regular files are opened — a FIFO can neither block the open nor a device
// be opened — and a file is sent up to the size it had when opened.
func nodeLogs(dir string) http.Handler {
	return http.StripPrefix("/logs/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Opened per request, so a /var/log replaced or mounted after start is the one served.
		root, err := os.OpenRoot(dir)
		if err != nil {
			slog.Warn("node logs: open the log folder", "dir", dir, "err", err)
			http.Error(w, "node logs are unavailable", http.StatusServiceUnavailable)
			return
		}
		defer root.Close()
		http.FileServerFS(logFS{root}).ServeHTTP(w, r)
	}))
}

// logFS is the log folder as the file server reads it.
type logFS struct{ root *os.Root }

func (l logFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	// Stat first, so a device is never opened: opening some has side effects.
	fi, err := l.root.Stat(name)
	if err != nil {
		return nil, refused(name, err)
	}
	if !servable(fi) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	f, err := l.root.OpenFile(name, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, refused(name, err)
	}
	// What was opened may not be what was looked at: check it again.
	if fi, err = f.Stat(); err != nil || !servable(fi) {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	if fi.IsDir() {
		return logDir{f}, nil
	}
	return logFile{f, fi}, nil
}

func servable(fi fs.FileInfo) bool { return fi.Mode().IsRegular() || fi.IsDir() }

// refused keeps "not found" (404) and turns every other failure, among them a path or symlink
// that leads out of the folder, into "forbidden" (403) without saying more to the client.
func refused(name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	slog.Debug("node logs: refused", "name", name, "err", err)
	return &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
}

// logFile is a regular file whose size is fixed at open: a log written to while it is sent ends
// where it was, rather than being followed for as long as it grows.
type logFile struct {
	*os.File
	fi fs.FileInfo
}

func (f logFile) Stat() (fs.FileInfo, error) { return f.fi, nil }

// logDir is a directory whose full listing is refused past maxListedEntries.
type logDir struct{ *os.File }

func (d logDir) ReadDir(n int) ([]fs.DirEntry, error) {
	if n > 0 {
		return d.File.ReadDir(n)
	}
	entries, err := d.File.ReadDir(maxListedEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(entries) > maxListedEntries {
		return nil, fmt.Errorf("%s: more than %d entries", d.Name(), maxListedEntries)
	}
	return entries, nil
}
