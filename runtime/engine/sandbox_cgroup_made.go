package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/nodelet/nodelet/runtime/store"
)

// madeCgroups is the ledger of the cgroup dirs above pods' own that this runtime made, kept on
// disk so it outlives a restart. A sandbox's record lists what it made itself, but a parent such as
// <root>/besteffort is shared: when the pod that made it goes first, the parent is busy and stays,
// and the pod that goes last never made it. The ledger lets whichever pod goes last remove it,
// while a parent the client made (the kubelet's QoS cgroups) is never in it and never touched.
type madeCgroups struct {
	mu   sync.Mutex
	file string
	set  map[string]bool
}

// openMadeCgroups loads the ledger and adds what the sandbox records say they made, so dirs made
// before the ledger existed (or before a crash cut a write short) are covered too.
func openMadeCgroups(file string, records map[string]*store.Sandbox) (*madeCgroups, error) {
	m := &madeCgroups{file: file, set: map[string]bool{}}
	// A write cut short by a crash leaves its temporary file; the ledger itself is whole or old.
	stale, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".tmp-"+filepath.Base(file)+"-*"))
	for _, t := range stale {
		_ = os.Remove(t)
	}
	b, err := os.ReadFile(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		var dirs []string
		// A torn ledger only forgets dirs: the records below still name most of them.
		_ = json.Unmarshal(b, &dirs)
		for _, d := range dirs {
			m.set[d] = true
		}
	}
	for _, sb := range records {
		for _, d := range sb.CgroupCreated {
			m.set[d] = true
		}
	}
	return m, nil
}

// create makes the pod cgroup rel and records every dir it had to make on the way (keep and its
// ancestors excepted), under the lock that release also takes, so a parent cannot be removed
// between being found present and the pod landing in it.
func (m *madeCgroups) create(rel, keep string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	missing, err := missingCgroups(rel, keep)
	if err != nil {
		return err
	}
	if err := createCgroup(rel); err != nil {
		return err
	}
	if len(missing) == 0 {
		return nil
	}
	for _, d := range missing {
		m.set[d] = true
	}
	return m.save()
}

// release removes, deepest first, the ancestors of the pod cgroup rel below keep that this runtime
// made and that no pod uses any more. A busy one stays for the pod that goes last.
func (m *madeCgroups) release(rel, keep string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	roots, err := cgroupRoots()
	if err != nil {
		return err
	}
	changed := false
	for p := path.Dir(rel); p != "/" && p != "." && p != keep && !strings.HasPrefix(keep, p+"/"); p = path.Dir(p) {
		if !m.set[p] {
			continue
		}
		gone := true
		for _, r := range roots {
			// One try, no waiting: busy means another pod lives below it.
			if err := os.Remove(filepath.Join(r.Path, p)); err != nil && !os.IsNotExist(err) {
				gone = false
			}
		}
		if !gone {
			break // its ancestors are busy too
		}
		delete(m.set, p)
		changed = true
	}
	// Dirs removed with their pods (the pod's own records) leave the ledger as well.
	for d := range m.set {
		if d == rel || strings.HasPrefix(d, rel+"/") {
			delete(m.set, d)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return m.save()
}

func (m *madeCgroups) save() error {
	dirs := make([]string, 0, len(m.set))
	for d := range m.set {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	b, err := json.Marshal(dirs)
	if err != nil {
		return err
	}
	if err := store.WriteFileAtomic(m.file, b, 0o600); err != nil {
		return fmt.Errorf("cgroup ledger: %w", err)
	}
	return nil
}
