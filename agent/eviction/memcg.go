package eviction

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// MemcgThreshold is one armed cgroup v1 memory threshold: the kernel signals its eventfd when the
// cgroup's memory.usage_in_bytes crosses the level, either way. The kubelet's
// kernelMemcgNotification does the same so that memory pressure is seen when it happens, not at
// the next monitoring tick. Closing the eventfd disarms it (the kernel drops the event).
type MemcgThreshold struct {
	Level int64
	efd   *os.File // non-blocking, so a Wait is parked in Go's poller and Close ends it
}

// ArmMemcgThreshold asks the kernel to signal when usage of the v1 memory cgroup dir crosses level.
func ArmMemcgThreshold(dir string, level int64) (*MemcgThreshold, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	efd := os.NewFile(uintptr(fd), "memcg-threshold")
	usage, err := os.Open(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		efd.Close()
		return nil, err
	}
	// The kernel takes its own reference to both files while registering; ours can go after.
	defer usage.Close()
	ctl, err := os.OpenFile(filepath.Join(dir, "cgroup.event_control"), os.O_WRONLY, 0)
	if err != nil {
		efd.Close()
		return nil, err
	}
	defer ctl.Close()
	if _, err := fmt.Fprintf(ctl, "%d %d %d", fd, usage.Fd(), level); err != nil {
		efd.Close()
		return nil, fmt.Errorf("arm memory threshold %d on %s: %w", level, dir, err)
	}
	return &MemcgThreshold{Level: level, efd: efd}, nil
}

// Wait blocks until the threshold is crossed (nil) or the threshold is closed (an error).
func (t *MemcgThreshold) Wait() error {
	var buf [8]byte // an eventfd is read 8 bytes at a time: the count of signals since the last read
	_, err := t.efd.Read(buf[:])
	return err
}

// Close disarms the threshold and ends a Wait.
func (t *MemcgThreshold) Close() error { return t.efd.Close() }

// memcgDir is the root v1 memory cgroup, or an error naming why notification cannot work here.
func (m *Machine) memcgDir() (string, error) {
	fs := m.cgroups()
	if fs.Unified() {
		return "", errors.New("cgroup v2 has no memory usage thresholds (cgroup.event_control is a cgroup v1 interface)")
	}
	dir := fs.Dir("memory", "/")
	if _, err := os.Stat(filepath.Join(dir, "cgroup.event_control")); err != nil {
		return "", fmt.Errorf("no cgroup v1 memory controller: %w", err)
	}
	return dir, nil
}

// CheckMemcgNotification says whether kernelMemcgNotification can be honoured on this machine.
func (m *Machine) CheckMemcgNotification() error {
	_, err := m.memcgDir()
	return err
}

// NotifyMemoryBelow arms a threshold that fires when sig falls below available. For
// memory.available that is on the root memory cgroup, available = MemTotal − (usage −
// inactive_file); for allocatableMemory.available on the pods' cgroup, available = its limit −
// (usage − inactive_file). So the usage level is capacity − available + inactive_file, with
// inactive_file as it is now (the kubelet computes it the same way and re-arms at each pass).
func (m *Machine) NotifyMemoryBelow(sig Signal, available int64) (*MemcgThreshold, error) {
	dir, err := m.memcgDir()
	if err != nil {
		return nil, err
	}
	var mem cgroupfs.Memory
	switch sig {
	case SignalMemoryAvailable:
		if mem, err = m.cgroups().RootMemory(m.meminfo()); err != nil {
			return nil, err
		}
	case SignalAllocatableMemoryAvailable:
		if m.PodsCgroup == "" {
			return nil, errors.New("no pods' cgroup")
		}
		dir = filepath.Join(dir, m.PodsCgroup)
		if mem, err = m.cgroups().Memory(m.PodsCgroup); err != nil {
			return nil, err
		} else if mem.Unlimited {
			return nil, fmt.Errorf("the pods' cgroup %s has no memory limit", m.PodsCgroup)
		}
	default:
		return nil, fmt.Errorf("%s is not a memory signal", sig)
	}
	capacity, inactive := int64(mem.Limit), int64(mem.InactiveFile)
	level := capacity - available + inactive
	if level <= 0 {
		return nil, fmt.Errorf("memory threshold level %d: nothing to arm", level)
	}
	return ArmMemcgThreshold(dir, level)
}
