package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteAndReplace(t *testing.T) {
	for name, write := range map[string]func(string, []byte, os.FileMode) error{"Write": Write, "Replace": Replace} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "f")
			for _, content := range []string{"one", "two, longer"} {
				if err := write(p, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(p)
				if err != nil || string(b) != content {
					t.Fatalf("read %q, %v; want %q", b, err, content)
				}
			}
			if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v", fi.Mode())
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("left %d files, want the target alone", len(entries))
			}
			// A folder that is gone: an error, nothing written anywhere else.
			if err := write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
				t.Error("wrote into a missing folder")
			}
		})
	}
}
