package eviction

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Observation is one signal's reading: what is left and of how much.
type Observation struct {
	Available int64
	Capacity  int64
}

// Observations are one pass's readings by signal; a signal missing was not measurable.
type Observations map[Signal]Observation

// Measurer reads the node's signals; the manager's tests give it made-up ones.
type Measurer interface {
	Measure(ctx context.Context) (Observations, error)
}

// Machine measures the real node: memory from the root cgroup as the kubelet's cadvisor does,
// filesystems with statfs, pids from the kernel's limits and /proc.
type Machine struct {
	// RootDir is the agent's root folder: nodefs is the filesystem holding it.
	RootDir string
	// ImageFs returns the folder the runtime keeps images in (CRI ImageFsInfo); "" or an error
	// means imagefs is nodefs.
	ImageFs func(ctx context.Context) (string, error)
	// PodsCgroup is the pods' top cgroup (kubepods, cgroupfs naming): its memory limit less its
	// working set is allocatableMemory.available, as the kubelet's pods system container gives
	// it. "" (or no limit on it) leaves the signal unmeasured.
	PodsCgroup string
	// Root is prefixed to /proc and /sys paths; tests point it at a made-up tree.
	Root string
}

// Measure reads every signal it can; it fails only when none could be read.
func (m *Machine) Measure(ctx context.Context) (Observations, error) {
	obs := Observations{}
	var errs []error
	if o, err := m.memory(); err != nil {
		errs = append(errs, fmt.Errorf("memory.available: %w", err))
	} else {
		obs[SignalMemoryAvailable] = o
	}
	if m.PodsCgroup != "" {
		if o, ok, err := m.podsMemory(); err != nil {
			errs = append(errs, fmt.Errorf("allocatableMemory.available: %w", err))
		} else if ok {
			obs[SignalAllocatableMemoryAvailable] = o
		}
	}
	nodeBytes, nodeInodes, err := statfs(m.RootDir)
	if err != nil {
		errs = append(errs, fmt.Errorf("nodefs: %w", err))
	} else {
		obs[SignalNodeFsAvailable], obs[SignalNodeFsInodesFree] = nodeBytes, nodeInodes
	}
	imgBytes, imgInodes, imgErr := nodeBytes, nodeInodes, err
	if m.ImageFs != nil {
		if dir, ierr := m.ImageFs(ctx); ierr == nil && dir != "" {
			imgBytes, imgInodes, imgErr = statfs(dir)
		}
	}
	if imgErr == nil {
		obs[SignalImageFsAvailable], obs[SignalImageFsInodesFree] = imgBytes, imgInodes
	}
	if o, err := m.pids(); err != nil {
		errs = append(errs, fmt.Errorf("pid.available: %w", err))
	} else {
		obs[SignalPIDAvailable] = o
	}
	if len(obs) == 0 {
		return nil, errors.Join(errs...)
	}
	return obs, nil
}

func statfs(dir string) (bytes, inodes Observation, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return Observation{}, Observation{}, err
	}
	bs := int64(st.Bsize)
	return Observation{Available: int64(st.Bavail) * bs, Capacity: int64(st.Blocks) * bs},
		Observation{Available: int64(st.Ffree), Capacity: int64(st.Files)}, nil
}

const cgroup2Magic = 0x63677270

// memory is MemTotal minus the root cgroup's working set (usage less inactive file pages, which
// the kernel reclaims first), the kubelet's memory.available.
func (m *Machine) memory() (Observation, error) {
	total, memFree, err := m.meminfo()
	if err != nil {
		return Observation{}, err
	}
	cg := filepath.Join(m.Root, "/sys/fs/cgroup")
	var usage, inactive int64
	var st syscall.Statfs_t
	if err := syscall.Statfs(cg, &st); err == nil && st.Type == cgroup2Magic {
		// The v2 root has no memory.current: its usage is what the machine has in use.
		usage = total - memFree
		if inactive, err = statValue(filepath.Join(cg, "memory.stat"), "inactive_file"); err != nil {
			return Observation{}, err
		}
	} else {
		b, err := os.ReadFile(filepath.Join(cg, "memory", "memory.usage_in_bytes"))
		if err != nil {
			return Observation{}, err
		}
		if usage, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
			return Observation{}, fmt.Errorf("memory.usage_in_bytes: %w", err)
		}
		if inactive, err = statValue(filepath.Join(cg, "memory", "memory.stat"), "total_inactive_file"); err != nil {
			return Observation{}, err
		}
	}
	ws := max(usage-inactive, 0)
	return Observation{Available: max(total-ws, 0), Capacity: total}, nil
}

// unlimited is where cgroup v1 memory limits start to mean "none" (the page-rounded max int64).
const unlimited = int64(1) << 62

// memoryLimit reads a cgroup's memory limit (v1 memory.limit_in_bytes, v2 memory.max); ok is
// false when there is none ("max", or v1's page-rounded largest value).
func memoryLimit(path string) (limit int64, ok bool, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false, err
	}
	text := strings.TrimSpace(string(b))
	if text == "max" {
		return 0, false, nil
	}
	if limit, err = strconv.ParseInt(text, 10, 64); err != nil {
		return 0, false, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return limit, limit < unlimited, nil
}

// podsMemory is allocatableMemory.available: the pods' cgroup's memory limit less its working set.
// ok is false when the cgroup has no limit (enforceNodeAllocatable without pods).
func (m *Machine) podsMemory() (o Observation, ok bool, err error) {
	cg := filepath.Join(m.Root, "/sys/fs/cgroup")
	var st syscall.Statfs_t
	v2 := syscall.Statfs(cg, &st) == nil && st.Type == cgroup2Magic
	dir, limitFile, usageFile, inactiveKey := filepath.Join(cg, "memory", m.PodsCgroup),
		"memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"
	if v2 {
		dir, limitFile, usageFile, inactiveKey = filepath.Join(cg, m.PodsCgroup), "memory.max", "memory.current", "inactive_file"
	}
	limit, ok, err := memoryLimit(filepath.Join(dir, limitFile))
	if err != nil || !ok {
		return Observation{}, false, err
	}
	b, err := os.ReadFile(filepath.Join(dir, usageFile))
	if err != nil {
		return Observation{}, false, err
	}
	usage, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return Observation{}, false, fmt.Errorf("%s: %w", usageFile, err)
	}
	inactive, err := statValue(filepath.Join(dir, "memory.stat"), inactiveKey)
	if err != nil {
		return Observation{}, false, err
	}
	ws := max(usage-inactive, 0)
	return Observation{Available: max(limit-ws, 0), Capacity: limit}, true, nil
}

func (m *Machine) meminfo() (total, free int64, err error) {
	b, err := os.ReadFile(filepath.Join(m.Root, "/proc/meminfo"))
	if err != nil {
		return 0, 0, err
	}
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			total, found = v*1024, found+1
		case "MemFree:":
			free, found = v*1024, found+1
		}
	}
	if found < 2 {
		return 0, 0, errors.New("/proc/meminfo: no MemTotal or MemFree")
	}
	return total, free, nil
}

func statValue(path, key string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", path, key)
}

// pids is the kubelet's pid.available: the lower of the kernel's two limits on tasks, less the
// tasks there are.
func (m *Machine) pids() (Observation, error) {
	read := func(p string) (int64, error) {
		b, err := os.ReadFile(filepath.Join(m.Root, p))
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	pidMax, err := read("/proc/sys/kernel/pid_max")
	if err != nil {
		return Observation{}, err
	}
	limit := pidMax
	if threads, err := read("/proc/sys/kernel/threads-max"); err == nil && threads < limit {
		limit = threads
	}
	// Tasks, threads included, are what pid_max and threads-max bound: the kernel's count is the
	// total in /proc/loadavg's "running/total" (sysinfo's procs, which the kubelet reads).
	b, err := os.ReadFile(filepath.Join(m.Root, "/proc/loadavg"))
	if err != nil {
		return Observation{}, err
	}
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return Observation{}, fmt.Errorf("/proc/loadavg: %q", b)
	}
	_, total, ok := strings.Cut(f[3], "/")
	n, err := strconv.ParseInt(total, 10, 64)
	if !ok || err != nil {
		return Observation{}, fmt.Errorf("/proc/loadavg: tasks %q", f[3])
	}
	return Observation{Available: max(limit-n, 0), Capacity: limit}, nil
}

// ImageFsInfoer is CRI's ImageFsInfo.
type ImageFsInfoer interface {
	ImageFsInfo(ctx context.Context, in *runtimeapi.ImageFsInfoRequest, opts ...grpc.CallOption) (*runtimeapi.ImageFsInfoResponse, error)
}

// ImageFsMountpoint is where the runtime keeps images, from CRI ImageFsInfo (Machine.ImageFs):
// imagefs is measured there, and is nodefs when the runtime names none.
func ImageFsMountpoint(svc ImageFsInfoer) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		fs, err := svc.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
		if err != nil {
			return "", err
		}
		for _, f := range fs.ImageFilesystems {
			if f.GetFsId().GetMountpoint() != "" {
				return f.FsId.Mountpoint, nil
			}
		}
		return "", nil
	}
}
