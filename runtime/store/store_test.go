package store

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

type rec struct {
	Name string `json:"name"`
	N    int    `json:"n"`
}

func TestDirPutLoadDelete(t *testing.T) {
	d, err := OpenDir[rec](t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	id := NewID()
	if err := d.Put(id, &rec{Name: "a", N: 1}); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(id, &rec{Name: "a", N: 2}); err != nil {
		t.Fatal(err)
	}
	got, bad, err := d.Load()
	if err != nil || len(bad) != 0 {
		t.Fatalf("load: %v %v", err, bad)
	}
	if len(got) != 1 || got[id].N != 2 {
		t.Fatalf("load = %+v", got)
	}
	if err := d.Delete(id); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(id); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if got, _, _ := d.Load(); len(got) != 0 {
		t.Fatalf("after delete: %+v", got)
	}
}

// A crash mid-Put leaves a temp file, and a torn record must not stop the load of the others.
func TestDirLoadSurvivesLitterAndTornRecords(t *testing.T) {
	dir := t.TempDir()
	d, _ := OpenDir[rec](dir)
	good := NewID()
	if err := d.Put(good, &rec{Name: "ok"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, ".tmp-x.json-123"), []byte("{"), 0o600)
	os.WriteFile(filepath.Join(dir, NewID()+".json"), []byte(`{"name":`), 0o600)
	got, bad, err := d.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[good] == nil || len(bad) != 1 {
		t.Fatalf("got %d records, %d bad; want 1 and 1", len(got), len(bad))
	}
	if _, err := os.Stat(filepath.Join(dir, ".tmp-x.json-123")); !os.IsNotExist(err) {
		t.Fatalf("temp litter not swept: %v", err)
	}
}

func TestValidIDRefusesPaths(t *testing.T) {
	for _, id := range []string{"", "../x", "a/b", "ABC", "abc.json", string(make([]byte, 200))} {
		if err := ValidID(id); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ValidID(%q) = %v, want InvalidArgument", id, err)
		}
	}
	d, _ := OpenDir[rec](t.TempDir())
	if err := d.Put("../../etc/x", &rec{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("Put with a path id = %v", err)
	}
}

func TestRegistryLookups(t *testing.T) {
	r := NewRegistry[string]()
	r.Add("abc123", "one")
	r.Add("abd456", "two")
	tests := []struct {
		name, key, want string
		err             error
	}{
		{"full id", "abc123", "one", nil},
		{"unique prefix", "abd", "two", nil},
		{"ambiguous prefix", "ab", "", errdefs.ErrInvalidArgument},
		{"unknown", "ff", "", errdefs.ErrNotFound},
		{"empty", "", "", errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Get(tt.key)
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) || got != tt.want {
				t.Fatalf("Get(%q) = %q, %v; want %q, %v", tt.key, got, err, tt.want, tt.err)
			}
		})
	}
	if l := r.List(); len(l) != 2 || l[0] != "one" {
		t.Fatalf("List = %v", l)
	}
}

// Two creates of one name race; exactly one may win, and the name frees only for its holder.
func TestRegistryNameReservation(t *testing.T) {
	r := NewRegistry[int]()
	var wg sync.WaitGroup
	wins := make(chan string, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := NewID()
			if r.ReserveName("pod_ns_uid_0", id) == nil {
				wins <- id
			}
		}()
	}
	wg.Wait()
	close(wins)
	var winners []string
	for w := range wins {
		winners = append(winners, w)
	}
	if len(winners) != 1 {
		t.Fatalf("%d creates won the name, want 1", len(winners))
	}
	r.ReleaseName("pod_ns_uid_0", "someone-else")
	if err := r.ReserveName("pod_ns_uid_0", NewID()); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("release by a non-holder freed the name: %v", err)
	}
	r.ReleaseName("pod_ns_uid_0", winners[0])
	if err := r.ReserveName("pod_ns_uid_0", NewID()); err != nil {
		t.Fatalf("name not freed by its holder: %v", err)
	}
}

// Unreadable records still own their id: the orphan sweep must not remove what they name.
func TestDirIDsIncludesTornRecords(t *testing.T) {
	dir := t.TempDir()
	d, _ := OpenDir[rec](dir)
	good, torn := NewID(), NewID()
	if err := d.Put(good, &rec{Name: "ok"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, torn+".json"), []byte(`{"name":`), 0o600)
	os.WriteFile(filepath.Join(dir, ".tmp-"+good+".json-1"), []byte("{"), 0o600)
	os.Mkdir(filepath.Join(dir, NewID()), 0o700) // a bundle dir is not a record
	ids, err := d.IDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || !ids[good] || !ids[torn] {
		t.Fatalf("IDs = %v, want %s and %s", ids, good, torn)
	}
}
