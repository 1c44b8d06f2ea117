package imagestore

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A killed pull leaves a half-unpacked layer in tmp/, a link to nothing and an unheld pin. The next
// Open sweeps tmp/, GC drops the link, and nothing half-made was ever visible.
func TestRecoveryAfterKilledPull(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	os.MkdirAll(filepath.Join(dir, "tmp", "layer-123", "diff", "usr"), 0o755)
	os.WriteFile(filepath.Join(dir, "tmp", "pin-999"), []byte("sha256:dead"), 0o600)
	os.Symlink("../layers/abc/diff", filepath.Join(dir, "l", "DANGLING"))
	if imgs, _ := s.List(); len(imgs) != 0 {
		t.Fatal("something visible")
	}
	s = openStore(t, dir)
	if ents, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(ents) != 0 {
		t.Fatalf("tmp not swept: %v", ents)
	}
	if err := s.GC(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "l", "DANGLING")); !os.IsNotExist(err) {
		t.Fatalf("dangling link kept: %v", err)
	}
}

// A crash between the two writes of a retag leaves two records claiming one tag; the newer wins.
func TestTagClaimedTwiceAfterCrash(t *testing.T) {
	s := openStore(t, t.TempDir())
	old := &Image{ID: "sha256:" + hex64('a'), RepoTags: []string{"docker.io/library/x:1"}, Updated: time.Unix(100, 0)}
	newer := &Image{ID: "sha256:" + hex64('b'), RepoTags: []string{"docker.io/library/x:1"}, Updated: time.Unix(200, 0)}
	for _, img := range []*Image{old, newer} {
		if err := s.writeRecord(img); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Get("x:1")
	if err != nil || got.ID != newer.ID {
		t.Fatalf("x:1 is %v (%v), want the newer record", got, err)
	}
	imgs, _ := s.List()
	for _, img := range imgs {
		if img.ID == old.ID && slices.Contains(img.RepoTags, "docker.io/library/x:1") {
			t.Fatal("older record still lists the tag")
		}
	}
}

func hex64(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}
