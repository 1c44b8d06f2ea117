package imagestore

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOpenTightensOlderStore opens a store whose dirs an older version left open to others: the
// shared dirs become 0700 or 0711, and the rootfs dirs of existing containers lose every right
// of others (a user-namespaced one keeps its group's search right).
func TestOpenTightensOlderStore(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"blobs/sha256", "layers/abc/diff", "l", "images", "tmp", "rootfs/plain/merged", "rootfs/userns/merged"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "rootfs/userns"), 0o710); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(root); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		want os.FileMode
	}{
		{"", 0o711},
		{"blobs", 0o700},
		{"blobs/sha256", 0o700},
		{"layers", 0o700},
		{"l", 0o700},
		{"images", 0o700},
		{"tmp", 0o700},
		{"rootfs", 0o711},
		{"rootfs/plain", 0o710},
		{"rootfs/userns", 0o710},
	}
	for _, tt := range tests {
		t.Run("/"+tt.name, func(t *testing.T) {
			st, err := os.Stat(filepath.Join(root, tt.name))
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != tt.want {
				t.Errorf("mode %o, want %o", got, tt.want)
			}
		})
	}
}

// TestRootfsDirIsPrivate checks the dirs of a new rootfs: private, but for the modes the
// container's / takes from upper/ and merged/.
func TestRootfsDirIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ctr")
	if err := makeRootfsDirs(dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{"": 0o700, "upper": 0o755, "work": 0o700, "merged": 0o755} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", name, got, want)
		}
	}
}
