package cm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	cgroups "github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// DefaultCgroupMount is where the cgroup hierarchies are mounted.
const DefaultCgroupMount = "/sys/fs/cgroup"

// Cgroups writes limits on cgroups named as with the cgroupfs driver ("/kubepods"): on cgroup v1 in
// the cpu, memory, pids and hugetlb hierarchies under Mount, on cgroup v2 in the unified hierarchy
// at Mount, with the controllers enabled on the way down.
type Cgroups struct {
	Mount   string
	Unified bool
}

// HostCgroups are this host's: cgroup v2 only when the unified hierarchy holds the controllers
// (a hybrid host like a v1 one).
func HostCgroups() Cgroups {
	return Cgroups{Mount: DefaultCgroupMount, Unified: cgroups.Mode() == cgroups.Unified}
}

func checkName(name string) error {
	if !strings.HasPrefix(name, "/") || name == "/" || strings.Contains(name, "..") {
		return fmt.Errorf("cgroup %q: want an absolute path below the root", name)
	}
	return nil
}

// Apply creates the cgroup where missing and writes l on it.
func (c Cgroups) Apply(name string, l Limits) error {
	if err := checkName(name); err != nil {
		return err
	}
	if c.Unified {
		return c.applyV2(name, l)
	}
	return c.applyV1(name, l)
}

// Exists reports the cgroup in every hierarchy limits are written in.
func (c Cgroups) Exists(name string) bool {
	if checkName(name) != nil {
		return false
	}
	if c.Unified {
		_, err := os.Stat(filepath.Join(c.Mount, name, "cgroup.procs"))
		return err == nil
	}
	for _, sub := range c.v1Subsystems() {
		if _, err := os.Stat(filepath.Join(c.Mount, sub, name)); err != nil {
			return false
		}
	}
	return true
}

// v1Subsystems are the mounted hierarchies limits go to.
func (c Cgroups) v1Subsystems() []string {
	var out []string
	for _, s := range []string{"cpu", "memory", "pids", "hugetlb"} {
		if _, err := os.Stat(filepath.Join(c.Mount, s)); err == nil {
			out = append(out, s)
		}
	}
	return out
}

func (c Cgroups) applyV1(name string, l Limits) error {
	hierarchy := func() ([]cgroup1.Subsystem, error) {
		var subs []cgroup1.Subsystem
		for _, s := range c.v1Subsystems() {
			switch s {
			case "cpu":
				subs = append(subs, cgroup1.NewCpu(c.Mount))
			case "memory":
				subs = append(subs, cgroup1.NewMemory(c.Mount))
			case "pids":
				subs = append(subs, cgroup1.NewPids(c.Mount))
			case "hugetlb":
				h, err := cgroup1.NewHugetlb(c.Mount)
				if err != nil {
					return nil, err
				}
				subs = append(subs, h)
			}
		}
		if len(subs) == 0 {
			return nil, fmt.Errorf("no cpu, memory, pids or hugetlb cgroup hierarchy under %s", c.Mount)
		}
		return subs, nil
	}
	res := &specs.LinuxResources{}
	if l.CPUShares != nil || l.CPUQuota != nil {
		res.CPU = &specs.LinuxCPU{Shares: l.CPUShares, Quota: l.CPUQuota, Period: l.CPUPeriod}
	}
	if l.Memory != nil {
		res.Memory = &specs.LinuxMemory{Limit: l.Memory}
	}
	if l.Pids != nil {
		res.Pids = &specs.LinuxPids{Limit: l.Pids}
	}
	for size, limit := range l.HugePages {
		res.HugepageLimits = append(res.HugepageLimits, specs.LinuxHugepageLimit{Pagesize: pageSizeName(size), Limit: uint64(limit)})
	}
	if _, err := cgroup1.New(cgroup1.StaticPath(name), res, cgroup1.WithHierarchy(hierarchy)); err != nil {
		return fmt.Errorf("cgroup %s: %w", name, err)
	}
	return nil
}

func (c Cgroups) applyV2(name string, l Limits) error {
	res := &cgroup2.Resources{}
	if l.CPUShares != nil || l.CPUQuota != nil {
		res.CPU = &cgroup2.CPU{}
		if l.CPUShares != nil {
			w := SharesToWeight(*l.CPUShares)
			res.CPU.Weight = &w
		}
		if l.CPUQuota != nil {
			quota := l.CPUQuota
			if *quota < 0 {
				quota = nil // "max"
			}
			res.CPU.Max = cgroup2.NewCPUMax(quota, l.CPUPeriod)
		}
	}
	if l.Memory != nil {
		res.Memory = &cgroup2.Memory{Max: l.Memory}
	}
	if l.Pids != nil {
		res.Pids = &cgroup2.Pids{Max: *l.Pids}
	}
	if len(l.HugePages) > 0 {
		var h cgroup2.HugeTlb
		for size, limit := range l.HugePages {
			h = append(h, cgroup2.HugeTlbEntry{HugePageSize: pageSizeName(size), Limit: uint64(limit)})
		}
		res.HugeTlb = &h
	}
	if _, err := cgroup2.NewManager(c.Mount, name, res); err != nil {
		return fmt.Errorf("cgroup %s: %w", name, err)
	}
	return nil
}

// errNoCgroup: a reserved cgroup to enforce on must exist; the agent does not make it, since
// something else (systemd, the admin) puts the system's or Kubernetes' daemons there.
var errNoCgroup = errors.New("does not exist")

// Dirs are the folders of the cgroup name in every hierarchy (on v1 each controller's, also those
// limits are not written in, since runtimes make pod cgroups in all of them).
func (c Cgroups) Dirs(name string) []string {
	if checkName(name) != nil {
		return nil
	}
	if c.Unified {
		return []string{filepath.Join(c.Mount, name)}
	}
	ents, err := os.ReadDir(c.Mount)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() { // a co-mounted controller's symlink (cpu -> cpu,cpuacct) is the same hierarchy
			out = append(out, filepath.Join(c.Mount, e.Name(), name))
		}
	}
	return out
}

// Procs are the processes in the cgroup and below it, in any hierarchy.
func (c Cgroups) Procs(name string) []int {
	seen := map[int]bool{}
	var out []int
	for _, d := range c.Dirs(name) {
		filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
					seen[pid] = true
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	return out
}

// Remove removes the cgroup and the cgroups below it in every hierarchy, the leaves first (rmdir is
// the only way to delete a cgroup, and it fails on one with children or processes).
func (c Cgroups) Remove(name string) error {
	var errs []error
	for _, d := range c.Dirs(name) {
		if err := removeTree(d); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func removeTree(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return os.Remove(dir)
}
