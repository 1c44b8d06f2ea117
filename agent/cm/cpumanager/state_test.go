package cpumanager

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

// The checksums below were written by the kubelet (v1.34's own checkpoint tests hold them): a
// file this agent writes must be one the kubelet reads, and the other way round.
func TestChecksumIsTheKubelets(t *testing.T) {
	for _, tc := range []struct {
		cp   checkpoint
		want checksum
	}{
		{checkpoint{PolicyName: "none", DefaultCPUSet: "4-6", Entries: map[string]map[string]string{}}, 354655845},
		{checkpoint{PolicyName: "none", DefaultCPUSet: "1-3", Entries: map[string]map[string]string{
			"pod": {"container1": "4-6", "container2": "1-3"}}}, 3610638499},
		{checkpoint{PolicyName: "other", DefaultCPUSet: "1-3", Entries: map[string]map[string]string{}}, 1394507217},
		{checkpoint{PolicyName: "none", DefaultCPUSet: "1.3", Entries: map[string]map[string]string{}}, 3021697696},
	} {
		if got := tc.cp.sum(); got != tc.want {
			t.Errorf("%+v: checksum %d, the kubelet's is %d", tc.cp, got, tc.want)
		}
	}
}

func TestReadState(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StateFile)
	for _, tc := range []struct {
		name, file, policy, err string
		defaultSet              string
		assigned                map[string]string // "pod/container" → cpus
	}{
		{name: "kubelet's file", file: `{"policyName":"none","defaultCPUSet":"1-3","entries":{"pod":{"container1":"4-6","container2":"1-3"}},"checksum":3610638499}`,
			policy: "none", defaultSet: "1-3", assigned: map[string]string{"pod/container1": "4-6", "pod/container2": "1-3"}},
		{name: "no checksum", file: `{"policyName":"static","defaultCpuSet":"0-3"}`, policy: "static", defaultSet: "0-3"},
		{name: "wrong checksum", file: `{"policyName":"none","defaultCpuSet":"4-6","entries":{},"checksum":1337}`, policy: "none",
			err: "checkpoint is corrupted"},
		{name: "other policy", file: `{"policyName":"none","defaultCpuSet":"","checksum":0}`, policy: "static",
			err: `could not restore state from checkpoint: configured policy "static" differs from state checkpoint policy "none", please drain this node and delete the CPU manager checkpoint file "` + path + `" before restarting Kubelet`},
		{name: "bad default", file: `{"policyName":"static","defaultCpuSet":"1.3"}`, policy: "static", err: `could not parse default cpu set "1.3"`},
		{name: "bad entry", file: `{"policyName":"static","defaultCpuSet":"0","entries":{"p":{"c":"asd"}}}`, policy: "static",
			err: `could not parse cpuset "asd" for container "c" in pod "p"`},
		{name: "not json", file: `{`, policy: "static", err: "unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			st, err := readState(path, tc.policy)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := st.defaultSet.String(); got != tc.defaultSet {
				t.Errorf("default set %q, want %q", got, tc.defaultSet)
			}
			for key, want := range tc.assigned {
				pod, c, _ := strings.Cut(key, "/")
				if got, _ := st.assigned(pod, c); got.String() != want {
					t.Errorf("%s: %q, want %q", key, got, want)
				}
			}
		})
	}
}

func TestStateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), StateFile)
	st := newState("static")
	st.defaultSet = cpuset.New(0, 3)
	st.assign("uid-1", "app", cpuset.New(1, 2))
	if err := st.write(path); err != nil {
		t.Fatal(err)
	}
	got, err := readState(path, "static")
	if err != nil {
		t.Fatal(err)
	}
	// Pod UIDs are nobody else's business.
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("checkpoint mode %v, %v; want 0600", fi.Mode(), err)
	}
	if !got.defaultSet.Equals(st.defaultSet) {
		t.Errorf("default %v, want %v", got.defaultSet, st.defaultSet)
	}
	if set, _ := got.assigned("uid-1", "app"); !set.Equals(cpuset.New(1, 2)) {
		t.Errorf("assignment %v", set)
	}
	if _, err := readState(path, "none"); err == nil {
		t.Error("a static checkpoint was read under the none policy")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("the write left %d files, want only the checkpoint", len(entries))
	}
}

func TestReadStateRefusesNonRegular(t *testing.T) {
	path := filepath.Join(t.TempDir(), StateFile)
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := readState(path, "static"); err == nil || !strings.Contains(err.Error(), "regular file") {
		t.Fatalf("error %v", err)
	}
	if _, err := readState(filepath.Join(t.TempDir(), StateFile), "static"); err != errNoState {
		t.Fatalf("missing file: %v", err)
	}
}
