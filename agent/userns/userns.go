// Package userns gives each pod with spec.hostUsers: false a user namespace of its own, as the
// kubelet's user namespace manager does: 65536 host IDs per pod, taken from above the host's
// first 65536 (or from the "kubelet" user's subordinate IDs), never the range of another pod.
// A pod's range is recorded in pods/<uid>/userns under the root dir before its sandbox is asked
// for, read back at start, so a restarted agent gives a running pod the range it runs with and
// never hands that range to another; it is freed when the pod terminates or its folder goes.
//
// The runtime is asked nothing but whether the pod's handler supports user namespaces: a pod it
// cannot give one is refused, never run with the host's IDs.
package userns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/internal/podpath"
)

// IDsPerPod is the size of every pod's range: the kubelet's default, and the only value of
// userNamespaces.idsPerPod the agent takes.
const IDsPerPod = 1 << 16

// maxHostID bounds the ranges: the kernel refuses a mapping that reaches 2^32-1, (uid_t)-1.
const maxHostID = 1<<32 - 1

// HandlerSupport tells whether a runtime handler can run a pod in its own user namespace
// (RuntimeHandlers asks the CRI runtime).
type HandlerSupport interface {
	SupportsUserNamespaces(ctx context.Context, handler string) (bool, error)
}

// Config is what the manager needs.
type Config struct {
	// RootDir holds pods/<uid>/userns.
	RootDir string
	// MaxPods is the node's pod limit: there must be at least as many ranges.
	MaxPods  int
	Handlers HandlerSupport
	// FirstID and Length, when set, are the host IDs pods may be given; left zero they are found
	// as the kubelet finds them.
	FirstID, Length uint32
	Log             *slog.Logger
}

// Manager allocates and records the pods' ranges.
type Manager struct {
	root     string
	handlers HandlerSupport
	log      *slog.Logger
	off      uint32 // the first range's index: its first ID / IDsPerPod
	count    int    // how many ranges there are

	mu    sync.Mutex
	used  []uint64 // one bit per range
	byPod map[types.UID]uint32
	// pick chooses where the search for a free range starts: a random place, as the kubelet's
	// allocator, so that a pod's IDs are not predictable from the order pods came in.
	pick func(n int) int
}

// New sets the IDs up and records the ranges of the pods found on disk. A checkpoint that cannot
// be read, or that claims a range another holds or outside the IDs, fails the start: running on
// would risk two pods sharing IDs.
func New(cfg Config) (*Manager, error) {
	if cfg.Handlers == nil {
		return nil, errors.New("user namespaces: no runtime handler check")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	first, length := cfg.FirstID, cfg.Length
	if first == 0 && length == 0 {
		var err error
		if first, length, err = hostIDs(); err != nil {
			return nil, fmt.Errorf("user namespaces: %w", err)
		}
	}
	switch {
	case first%IDsPerPod != 0:
		return nil, fmt.Errorf("user namespaces: first host ID %d is not a multiple of %d", first, IDsPerPod)
	case first < IDsPerPod:
		// Mapping the host's first IDs (root among them) would defeat the namespace.
		return nil, fmt.Errorf("user namespaces: first host ID %d must be at least %d", first, IDsPerPod)
	case length%IDsPerPod != 0:
		return nil, fmt.Errorf("user namespaces: %d host IDs is not a multiple of %d", length, IDsPerPod)
	}
	end := min(uint64(first)+uint64(length), maxHostID)
	count := int((end - uint64(first)) / IDsPerPod)
	if count < cfg.MaxPods {
		return nil, fmt.Errorf("user namespaces: %d ranges of %d host IDs are not enough to support %d pods", count, IDsPerPod, cfg.MaxPods)
	}
	m := &Manager{
		root: cfg.RootDir, handlers: cfg.Handlers, log: cfg.Log,
		off: first / IDsPerPod, count: count,
		used:  make([]uint64, (count+63)/64),
		byPod: map[types.UID]uint32{},
		pick:  rand.IntN,
	}
	uids, err := m.podsOnDisk()
	if err != nil {
		return nil, fmt.Errorf("user namespaces: %w", err)
	}
	for _, uid := range uids {
		from, n, found, err := readCheckpoint(m.root, uid)
		if err == nil && found {
			err = m.record(uid, from, n)
		}
		if err != nil {
			return nil, fmt.Errorf("user namespaces: pod %s: %w", uid, err)
		}
	}
	return m, nil
}

// GetOrCreateUserNamespaceMappings is the pod's user namespace for its sandbox and containers:
// the host's (mode NODE) unless spec.hostUsers is false; then its own range (mode POD), the one
// recorded for it or a free one recorded now. A handler without user namespace support gets the
// kubelet's refusal.
func (m *Manager) GetOrCreateUserNamespaceMappings(ctx context.Context, pod *v1.Pod, handler string) (*runtimeapi.UserNamespace, error) {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}, nil
	}
	if ok, err := m.handlers.SupportsUserNamespaces(ctx, handler); err != nil || !ok {
		msg := "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
		if handler != "" {
			msg = fmt.Sprintf("can't set `spec.hostUsers: false`, RuntimeClass handler %q does not support user namespaces", handler)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", msg, err)
		}
		return nil, errors.New(msg)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	first, err := m.rangeOf(pod.UID)
	if err != nil {
		return nil, err
	}
	ids := []*runtimeapi.IDMapping{{HostId: first, ContainerId: 0, Length: IDsPerPod}}
	gids := []*runtimeapi.IDMapping{{HostId: first, ContainerId: 0, Length: IDsPerPod}}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids, Gids: gids}, nil
}

// rangeOf is the pod's range: its checkpoint's, the one it holds (its checkpoint written again
// if it went), or a new one, recorded before it is returned.
func (m *Manager) rangeOf(uid types.UID) (uint32, error) {
	first, n, found, err := readCheckpoint(m.root, uid)
	if err != nil {
		return 0, fmt.Errorf("user namespace: %w", err)
	}
	if found {
		if err := m.record(uid, first, n); err != nil {
			return 0, fmt.Errorf("user namespace: %w", err)
		}
		return first, nil
	}
	if held, ok := m.byPod[uid]; ok {
		if err := writeCheckpoint(m.root, uid, held, IDsPerPod); err != nil {
			return 0, fmt.Errorf("user namespace: %w", err)
		}
		return held, nil
	}
	i, ok := m.allocate()
	if !ok {
		return 0, errors.New("create user namespace: could not find an empty slot to allocate a user namespace")
	}
	first = (m.off + uint32(i)) * IDsPerPod
	m.byPod[uid] = first
	if err := writeCheckpoint(m.root, uid, first, IDsPerPod); err != nil {
		m.releaseLocked(uid)
		return 0, fmt.Errorf("create user namespace: %w", err)
	}
	return first, nil
}

// record takes note of a range read from a checkpoint.
func (m *Manager) record(uid types.UID, first, length uint32) error {
	if length != IDsPerPod {
		return fmt.Errorf("wrong user namespace length %d, want %d", length, IDsPerPod)
	}
	if first%IDsPerPod != 0 {
		return fmt.Errorf("wrong user namespace offset %d", first)
	}
	if held, ok := m.byPod[uid]; ok {
		if held != first {
			return fmt.Errorf("different user namespace range already used by pod %q", uid)
		}
		return nil
	}
	i := int(first/IDsPerPod) - int(m.off)
	if i < 0 || i >= m.count {
		return fmt.Errorf("host ID %d is out of the user namespace ranges", first)
	}
	if m.isUsed(i) {
		return fmt.Errorf("range picked for pod %q already taken", uid)
	}
	m.setUsed(i, true)
	m.byPod[uid] = first
	return nil
}

// Holds returns the first host ID of the range the pod holds.
func (m *Manager) Holds(uid types.UID) (uint32, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	first, ok := m.byPod[uid]
	return first, ok
}

// Release frees the pod's range and removes its checkpoint (the pod terminated, as the kubelet
// frees it then).
func (m *Manager) Release(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.releaseLocked(uid)
}

func (m *Manager) releaseLocked(uid types.UID) {
	if err := removeCheckpoint(m.root, uid); err != nil && !errors.Is(err, podpath.ErrUnsafe) {
		m.log.Warn("remove user namespace checkpoint", "uid", uid, "err", err)
	}
	first, ok := m.byPod[uid]
	if !ok {
		return
	}
	delete(m.byPod, uid)
	m.setUsed(int(first/IDsPerPod)-int(m.off), false)
}

// CleanupOrphans frees the ranges of pods keep does not name: of pods whose folders are left and
// of pods whose folders went (housekeeping, after the orphaned pod folders were removed).
func (m *Manager) CleanupOrphans(keep func(types.UID) bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	uids, err := m.podsOnDisk()
	for _, uid := range uids {
		if !keep(uid) {
			m.releaseLocked(uid)
		}
	}
	for uid := range m.byPod {
		if !keep(uid) {
			m.releaseLocked(uid)
		}
	}
	return err
}

// podsOnDisk lists the pod folders under the root dir.
func (m *Manager) podsOnDisk() ([]types.UID, error) {
	ents, err := os.ReadDir(podpath.PodsDir(m.root))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []types.UID
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, types.UID(e.Name()))
		}
	}
	return out, nil
}

// allocate marks a free range used, searching from a random one.
func (m *Manager) allocate() (int, bool) {
	start := m.pick(m.count)
	for k := 0; k < m.count; k++ {
		i := (start + k) % m.count
		if !m.isUsed(i) {
			m.setUsed(i, true)
			return i, true
		}
	}
	return 0, false
}

func (m *Manager) isUsed(i int) bool { return m.used[i/64]&(1<<(i%64)) != 0 }

func (m *Manager) setUsed(i int, v bool) {
	if v {
		m.used[i/64] |= 1 << (i % 64)
	} else {
		m.used[i/64] &^= 1 << (i % 64)
	}
}
