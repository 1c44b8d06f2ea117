package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nodelet/nodelet/runtime/store"
)

// A ledger write cut short by SIGKILL leaves its temporary file behind; the next start removes it
// and keeps what the ledger and the records name.
func TestOpenMadeCgroupsAfterCrash(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "made.json")
	if err := os.WriteFile(file, []byte(`["/k/besteffort"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".tmp-made.json-123")
	if err := os.WriteFile(tmp, []byte(`["/k/bes`), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := openMadeCgroups(file, map[string]*store.Sandbox{"a": {CgroupCreated: []string{"/k/burstable"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	for _, d := range []string{"/k/besteffort", "/k/burstable"} {
		if !m.set[d] {
			t.Errorf("ledger lost %s: %v", d, m.set)
		}
	}
}
