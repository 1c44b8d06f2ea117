package regularfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestReadAndReadTailRefuseWhatIsNotAPlainFile(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("0123456789"), 0o644)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(plain, link)
	zero := filepath.Join(dir, "zero")
	os.Symlink("/dev/zero", zero)

	if b, err := Read(link, 10); err != nil || string(b) != "0123456789" {
		t.Errorf("Read through a symlink to a plain file: %q %v", b, err)
	}
	if _, err := Read(plain, 9); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Read past the bound: %v", err)
	}
	if b, err := ReadTail(plain, 4); err != nil || string(b) != "6789" {
		t.Errorf("ReadTail: %q %v", b, err)
	}
	for _, c := range []struct {
		name string
		read func(string) ([]byte, error)
		path string
	}{
		{"Read fifo", func(p string) ([]byte, error) { return Read(p, 10) }, fifo},
		{"Read /dev/zero link", func(p string) ([]byte, error) { return Read(p, 10) }, zero},
		{"Read dir", func(p string) ([]byte, error) { return Read(p, 10) }, dir},
		{"ReadTail fifo", func(p string) ([]byte, error) { return ReadTail(p, 10) }, fifo},
		{"ReadTail symlink", func(p string) ([]byte, error) { return ReadTail(p, 10) }, link},
	} {
		_, err := c.read(c.path)
		var pe *os.PathError
		if !errors.Is(err, ErrNotRegular) || !errors.As(err, &pe) {
			t.Errorf("%s: %v, want an *os.PathError wrapping ErrNotRegular", c.name, err)
		}
	}
}
