package engine

import (
	"os"
	"path/filepath"
	"testing"
)

func TestTightenPodDirs(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name       string
		mode, want os.FileMode
	}{
		{name: "older pod", mode: 0o755, want: 0o700},
		{name: "searchable pod", mode: 0o711, want: 0o700},
		{name: "private pod", mode: 0o700, want: 0o700},
	}
	for _, tt := range tests {
		if err := os.Mkdir(filepath.Join(dir, tt.name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, tt.name), tt.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := tightenPodDirs(dir); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := os.Stat(filepath.Join(dir, tt.name))
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != tt.want {
				t.Errorf("mode %o, want %o", got, tt.want)
			}
		})
	}
}

func TestPrivateLogDir(t *testing.T) {
	tests := []struct {
		name     string
		existing os.FileMode // 0: the dir does not exist yet
	}{
		{name: "made by the runtime"},
		{name: "made 0755 by the kubelet", existing: 0o755},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "pod", "ctr")
			if tt.existing != 0 {
				if err := os.MkdirAll(dir, tt.existing); err != nil {
					t.Fatal(err)
				}
			}
			if err := privateLogDir(dir); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != 0o700 {
				t.Errorf("mode %o, want 700", got)
			}
		})
	}
}
