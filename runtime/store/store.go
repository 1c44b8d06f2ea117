// Package store keeps the runtime's metadata: one JSON record per sandbox or container, written so
// that a daemon killed at any instant finds, on restart, either the old record or the new one, and an
// in-memory registry that gives the RPCs fast lookups by ID, ID prefix and name.
package store

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/runtime/errdefs"
)

// NewID returns a random 64-hex-digit ID, the form CRI clients expect and shorten.
func NewID() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // the kernel's CSPRNG does not fail
	}
	return hex.EncodeToString(b[:])
}

// Dir holds one record per object, as <dir>/<id>.json.
type Dir[T any] struct {
	path string
}

// OpenDir creates the directory if needed.
func OpenDir[T any](path string) (*Dir[T], error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, err
	}
	return &Dir[T]{path: path}, nil
}

// Put writes v as the record of id: to a temp file, fsynced, renamed over the old one, so the
// record is either wholly old or wholly new after a crash. A daemon killed at any point leaves the
// new one. The folder is not fsynced: after a power loss the old record (or none) may come back,
// which recovery and the orphan sweep already meet, since the containers and pods it described
// did not survive the reboot either; it saves a journal commit on each of a pod start's writes.
func (d *Dir[T]) Put(id string, v *T) error {
	if err := ValidID(id); err != nil {
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.Replace(filepath.Join(d.path, id+".json"), data, 0o600)
}

// Delete removes the record of id; a missing record is not an error. As with Put, a power loss
// may bring the record back; recovery finds its processes gone and the sweep its files.
func (d *Dir[T]) Delete(id string) error {
	if err := ValidID(id); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(d.path, id+".json")); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// Load reads every record. Records that do not parse are returned as errors in bad (keyed by
// file name) rather than failing the whole load: one torn file must not stop the daemon.
func (d *Dir[T]) Load() (records map[string]*T, bad map[string]error, err error) {
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return nil, nil, err
	}
	records = map[string]*T{}
	bad = map[string]error{}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".tmp-") {
			_ = os.Remove(filepath.Join(d.path, name)) // an interrupted Put
			continue
		}
		id, ok := strings.CutSuffix(name, ".json")
		if !ok {
			continue
		}
		data, err := os.ReadFile(filepath.Join(d.path, name))
		if err != nil {
			bad[name] = err
			continue
		}
		v := new(T)
		if err := json.Unmarshal(data, v); err != nil {
			bad[name] = err
			continue
		}
		records[id] = v
	}
	return records, bad, nil
}

// IDs lists the id of every record file, unreadable ones included: what a restarted daemon must
// not treat as unowned even when it cannot parse the record.
func (d *Dir[T]) IDs() (map[string]bool, error) {
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && !strings.HasPrefix(e.Name(), ".tmp-") {
			ids[id] = true
		}
	}
	return ids, nil
}

// WriteFileAtomic replaces path with data so that readers and crash recovery see either the old
// or the new content, never a mix.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	return atomicfile.Write(path, data, mode)
}

// ValidID accepts the IDs this runtime makes (hex) and refuses anything that could be a path.
func ValidID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("id %q: %w", id, errdefs.ErrInvalidArgument)
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("id %q: %w", id, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

// Registry is the in-memory index of one kind of object: by ID, unique ID prefix, and name.
// Names are reserved before the slow part of a create so that two concurrent creates of the same
// name cannot both succeed.
type Registry[T any] struct {
	mu    sync.RWMutex
	byID  map[string]T
	names map[string]string // name → id
}

// NewRegistry returns an empty registry.
func NewRegistry[T any]() *Registry[T] {
	return &Registry[T]{byID: map[string]T{}, names: map[string]string{}}
}

// ReserveName claims name for id, or fails with ErrAlreadyExists naming the holder.
func (r *Registry[T]) ReserveName(name, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if holder, ok := r.names[name]; ok && holder != id {
		return fmt.Errorf("name %q is reserved for %s: %w", name, holder, errdefs.ErrAlreadyExists)
	}
	r.names[name] = id
	return nil
}

// ReleaseName frees name if id holds it.
func (r *Registry[T]) ReleaseName(name, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names[name] == id {
		delete(r.names, name)
	}
}

// Add stores v under id.
func (r *Registry[T]) Add(id string, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byID[id] = v
}

// Delete forgets id (its name stays reserved until ReleaseName).
func (r *Registry[T]) Delete(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byID, id)
}

// Get finds an object by full ID or by a unique prefix of it, as crictl's short IDs are.
func (r *Registry[T]) Get(idOrPrefix string) (T, error) {
	var zero T
	if idOrPrefix == "" {
		return zero, fmt.Errorf("empty id: %w", errdefs.ErrInvalidArgument)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if v, ok := r.byID[idOrPrefix]; ok {
		return v, nil
	}
	var found []string
	for id := range r.byID {
		if strings.HasPrefix(id, idOrPrefix) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return zero, fmt.Errorf("%q: %w", idOrPrefix, errdefs.ErrNotFound)
	case 1:
		return r.byID[found[0]], nil
	}
	return zero, fmt.Errorf("id prefix %q matches %d objects: %w", idOrPrefix, len(found), errdefs.ErrInvalidArgument)
}

// List returns every object, ordered by ID for stable output.
func (r *Registry[T]) List() []T {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ids := make([]string, 0, len(r.byID))
	for id := range r.byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]T, 0, len(ids))
	for _, id := range ids {
		out = append(out, r.byID[id])
	}
	return out
}
