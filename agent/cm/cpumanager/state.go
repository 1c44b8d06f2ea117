package cpumanager

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"strings"

	"k8s.io/utils/cpuset"
	"k8s.io/utils/dump"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/internal/regularfile"
)

// StateFile is the checkpoint's name under the root dir, as the kubelet names it, so that tools
// reading a kubelet's node (and a kubelet started on this root dir later) find it.
const StateFile = "cpu_manager_state"

// maxStateSize bounds what is read: the file holds a line per container at most.
const maxStateSize = 4 << 20

// checkpoint is the file's content in the kubelet's v2 format. The Go field names matter: the
// checksum is computed over a dump of the struct that names them (see sum).
type checkpoint struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries,omitempty"`
	Checksum      checksum                     `json:"checksum"`
}

type checksum uint64

// sum is the kubelet's checksum: FNV-32a over the spew dump of the checkpoint with a zero
// checksum, as printed for the kubelet's own types. Our types print under our names, so those
// are written as the kubelet's before hashing; the tests hold checksums the kubelet wrote.
func (c checkpoint) sum() checksum {
	c.Checksum = 0
	if c.Entries == nil {
		c.Entries = map[string]map[string]string{}
	}
	s := dump.ForHash(&c)
	s = strings.Replace(s, "(*cpumanager.checkpoint)", "(*state.CPUManagerCheckpoint)", 1)
	s = strings.Replace(s, "(cpumanager.checksum)", "(checksum.Checksum)", 1)
	h := fnv.New32a()
	h.Write([]byte(s))
	return checksum(h.Sum32())
}

// state is what the checkpoint holds, parsed: the shared pool and the exclusive assignments,
// pod UID → container name → CPUs.
type state struct {
	policy      string
	defaultSet  cpuset.CPUSet
	assignments map[string]map[string]cpuset.CPUSet
}

func newState(policy string) *state {
	return &state{policy: policy, defaultSet: cpuset.New(), assignments: map[string]map[string]cpuset.CPUSet{}}
}

// errNoState: there is no checkpoint yet (a new node, or one whose file was deleted to change
// the policy).
var errNoState = errors.New("no CPU manager state")

// readState reads and checks the checkpoint at path against the configured policy. A file from
// another policy is refused as the kubelet refuses it: its exclusive CPUs would otherwise be
// forgotten while their containers still run on them.
func readState(path, policy string) (*state, error) {
	b, err := regularfile.Read(path, maxStateSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoState
	}
	if errors.Is(err, regularfile.ErrNotRegular) || errors.Is(err, regularfile.ErrTooLarge) {
		return nil, restoreError(path, err)
	}
	if err != nil {
		return nil, err
	}
	var cp checkpoint
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&cp); err != nil {
		return nil, restoreError(path, err)
	}
	if cp.Checksum != 0 && cp.Checksum != cp.sum() {
		return nil, restoreError(path, fmt.Errorf("checkpoint is corrupted: checksum %d, content sums to %d", cp.Checksum, cp.sum()))
	}
	if cp.PolicyName != policy {
		return nil, restoreError(path, fmt.Errorf("configured policy %q differs from state checkpoint policy %q", policy, cp.PolicyName))
	}
	st := newState(policy)
	if st.defaultSet, err = cpuset.Parse(cp.DefaultCPUSet); err != nil {
		return nil, restoreError(path, fmt.Errorf("could not parse default cpu set %q: %w", cp.DefaultCPUSet, err))
	}
	for pod, containers := range cp.Entries {
		for name, s := range containers {
			set, err := cpuset.Parse(s)
			if err != nil {
				return nil, restoreError(path, fmt.Errorf("could not parse cpuset %q for container %q in pod %q: %w", s, name, pod, err))
			}
			st.assign(pod, name, set)
		}
	}
	return st, nil
}

// restoreError words a refused checkpoint as the kubelet does, with what to do about it.
func restoreError(path string, err error) error {
	return fmt.Errorf("could not restore state from checkpoint: %v, please drain this node and delete the CPU manager checkpoint file %q before restarting Kubelet", err, path)
}

// write replaces the checkpoint atomically: a crash leaves the old file or the new one.
func (st *state) write(path string) error {
	cp := checkpoint{PolicyName: st.policy, DefaultCPUSet: st.defaultSet.String(), Entries: map[string]map[string]string{}}
	for pod, containers := range st.assignments {
		cp.Entries[pod] = map[string]string{}
		for name, set := range containers {
			cp.Entries[pod][name] = set.String()
		}
	}
	cp.Checksum = cp.sum()
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}

func (st *state) assign(pod, container string, set cpuset.CPUSet) {
	if st.assignments[pod] == nil {
		st.assignments[pod] = map[string]cpuset.CPUSet{}
	}
	st.assignments[pod][container] = set
}

func (st *state) assigned(pod, container string) (cpuset.CPUSet, bool) {
	set, ok := st.assignments[pod][container]
	return set, ok
}

// exclusive is every CPU some container holds.
func (st *state) exclusive() cpuset.CPUSet {
	all := cpuset.New()
	for _, containers := range st.assignments {
		for _, set := range containers {
			all = all.Union(set)
		}
	}
	return all
}
