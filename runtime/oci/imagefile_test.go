package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Each hostile /etc/passwd must be refused at once, naming the file, and must never reach the
// host's files or block the reader.
func TestContainerSpecUserHostileImageFiles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, root, passwd string)
	}{
		{name: "fifo", plant: func(t *testing.T, root, passwd string) {
			must(t, unix.Mkfifo(passwd, 0o644))
		}},
		{name: "symlink to /dev/zero", plant: func(t *testing.T, root, passwd string) {
			// Resolved inside the rootfs, where the image put its own /dev/zero.
			must(t, os.MkdirAll(filepath.Join(root, "dev"), 0o755))
			must(t, unix.Mknod(filepath.Join(root, "dev/zero"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))))
			must(t, os.Symlink("/dev/zero", passwd))
		}},
		{name: "relative symlink climbing to /dev/zero", plant: func(t *testing.T, root, passwd string) {
			must(t, os.MkdirAll(filepath.Join(root, "dev"), 0o755))
			must(t, unix.Mknod(filepath.Join(root, "dev/zero"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))))
			must(t, os.Symlink("../../../../../../../dev/zero", passwd))
		}},
		{name: "huge sparse file", plant: func(t *testing.T, root, passwd string) {
			f, err := os.Create(passwd)
			must(t, err)
			must(t, f.Truncate(8<<30))
			f.Close()
		}},
		{name: "directory", plant: func(t *testing.T, root, passwd string) {
			must(t, os.Mkdir(passwd, 0o755))
		}},
		{name: "unix socket", plant: func(t *testing.T, root, passwd string) {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			must(t, err)
			defer unix.Close(fd)
			must(t, unix.Bind(fd, &unix.SockaddrUnix{Name: passwd}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			must(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
			tc.plant(t, root, filepath.Join(root, "etc/passwd"))
			// Bounded only so that a regression fails instead of hanging the suite.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := resolveUser(root, nil, "app")
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, ErrUnsafeImageFile) || !strings.Contains(err.Error(), "/etc/passwd") {
					t.Fatalf("resolveUser = %v, want ErrUnsafeImageFile naming /etc/passwd", err)
				}
			case <-ctx.Done():
				t.Fatal("resolveUser blocked on the image's /etc/passwd")
			}
		})
	}
}

// A symlink whose target is missing inside the rootfs is a missing file, even where the host has
// one: numeric users still resolve, names do not.
func TestContainerSpecUserDanglingSymlinkIsMissing(t *testing.T) {
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must(t, os.Symlink("/proc/self/environ", filepath.Join(root, "etc/passwd")))
	if u, err := resolveUser(root, nil, "1000"); err != nil || u.UID != 1000 {
		t.Fatalf("numeric user through a dangling passwd: %+v, %v", u, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
