package eviction

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
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

// cgroups is the cgroup filesystem under Root: this host's, or a test's made-up tree (whose
// version is detected on each pass, as the tree may change between them).
func (m *Machine) cgroups() cgroupfs.FS {
	if m.Root == "" {
		return cgroupfs.Host()
	}
	mount := filepath.Join(m.Root, cgroupfs.Mount)
	return cgroupfs.FS{Mount: mount, Version: cgroupfs.Detect(mount)}
}

// meminfo is the machine's /proc/meminfo.
func (m *Machine) meminfo() string { return filepath.Join(m.Root, "/proc/meminfo") }

// memory is MemTotal minus the root cgroup's working set (usage less inactive file pages, which
// the kernel reclaims first), the kubelet's memory.available.
func (m *Machine) memory() (Observation, error) {
	mem, err := m.cgroups().RootMemory(m.meminfo())
	if err != nil {
		return Observation{}, err
	}
	avail, _ := mem.Available()
	return Observation{Available: int64(avail), Capacity: int64(mem.Limit)}, nil
}

// podsMemory is allocatableMemory.available: the pods' cgroup's memory limit less its working set.
// ok is false when the cgroup has no limit (enforceNodeAllocatable without pods).
func (m *Machine) podsMemory() (o Observation, ok bool, err error) {
	mem, err := m.cgroups().Memory(m.PodsCgroup)
	if err != nil || mem.Unlimited {
		return Observation{}, false, err
	}
	avail, _ := mem.Available()
	return Observation{Available: int64(avail), Capacity: int64(mem.Limit)}, true, nil
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

// imageFsRecheck is how long ImageFsMountpoint keeps its answer. Where the runtime keeps images
// changes only with its configuration, while ImageFsInfo measures the whole store to say it: asked
// every eviction pass, it cost an idle node of 50 pods a twentieth of its CPU.
const imageFsRecheck = 5 * time.Minute

// ImageFsMountpoint is where the runtime keeps images, from CRI ImageFsInfo (Machine.ImageFs):
// imagefs is measured there, and is nodefs when the runtime names none.
func ImageFsMountpoint(svc ImageFsInfoer) func(context.Context) (string, error) {
	var (
		mu  sync.Mutex
		dir string
		at  time.Time
	)
	return func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if !at.IsZero() && time.Since(at) < imageFsRecheck {
			return dir, nil
		}
		fs, err := svc.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
		if err != nil {
			return "", err
		}
		dir, at = "", time.Now()
		for _, f := range fs.ImageFilesystems {
			if f.GetFsId().GetMountpoint() != "" {
				dir = f.FsId.Mountpoint
				break
			}
		}
		return dir, nil
	}
}
