package cm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// Cgroups writes limits on cgroups named as with the cgroupfs driver ("/kubepods"): on cgroup v1 in
// the cpu, memory, pids and hugetlb hierarchies under Mount, on cgroup v2 in the unified hierarchy
// at Mount, with the controllers enabled on the way down.
//
// The files are written here rather than through a cgroup library: what the agent writes is a few
// numbers in flat files, and containerd/cgroups, the library used before, linked eBPF, D-Bus and
// systemd clients whose package inits every mode of the binary paid for in resident memory.
type Cgroups struct {
	Mount   string
	Unified bool
}

// HostCgroups are this host's: cgroup v2 only when the unified hierarchy holds the controllers
// (a hybrid host like a v1 one).
func HostCgroups() Cgroups {
	fs := cgroupfs.Host()
	return Cgroups{Mount: fs.Mount, Unified: fs.Unified()}
}

// FS is the filesystem c writes in, for reading it back.
func (c Cgroups) FS() cgroupfs.FS {
	v := cgroupfs.V1
	if c.Unified {
		v = cgroupfs.V2
	}
	return cgroupfs.FS{Mount: c.Mount, Version: v}
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
	var err error
	if c.Unified {
		err = c.applyV2(name, l)
	} else {
		err = c.applyV1(name, l)
	}
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", name, err)
	}
	return nil
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

// setting is one control file and the value written to it.
type setting struct{ file, value string }

// applyV1 makes the cgroup in each hierarchy, then writes that controller's files: cpu.shares,
// cpu.cfs_period_us and cpu.cfs_quota_us (when shares or a quota are set), memory.limit_in_bytes,
// pids.max (a positive limit only: v1 has no "max" to go back to) and hugetlb.<size>.limit_in_bytes.
func (c Cgroups) applyV1(name string, l Limits) error {
	subs := c.v1Subsystems()
	if len(subs) == 0 {
		return fmt.Errorf("no cpu, memory, pids or hugetlb cgroup hierarchy under %s", c.Mount)
	}
	for _, sub := range subs {
		var set []setting
		switch sub {
		case "cpu":
			if l.CPUShares != nil || l.CPUQuota != nil {
				set = appendUint(set, "cpu.shares", l.CPUShares)
				set = appendUint(set, "cpu.cfs_period_us", l.CPUPeriod)
				if l.CPUQuota != nil {
					set = append(set, setting{"cpu.cfs_quota_us", strconv.FormatInt(*l.CPUQuota, 10)})
				}
			}
		case "memory":
			if l.Memory != nil {
				set = append(set, setting{"memory.limit_in_bytes", strconv.FormatInt(*l.Memory, 10)})
			}
		case "pids":
			if l.Pids != nil && *l.Pids > 0 {
				set = append(set, setting{"pids.max", strconv.FormatInt(*l.Pids, 10)})
			}
		case "hugetlb":
			for size, limit := range l.HugePages {
				set = append(set, setting{"hugetlb." + pageSizeName(size) + ".limit_in_bytes", strconv.FormatUint(uint64(limit), 10)})
			}
		}
		dir := filepath.Join(c.Mount, sub, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := write(dir, set); err != nil {
			return err
		}
	}
	return nil
}

func appendUint(set []setting, file string, v *uint64) []setting {
	if v == nil {
		return set
	}
	return append(set, setting{file, strconv.FormatUint(*v, 10)})
}

// applyV2 makes the cgroup, enables the controllers its limits need in the subtree_control of
// every cgroup above it (the root's included), then writes cpu.weight, cpu.max, memory.max,
// pids.max and hugetlb.<size>.max. A cgroup it made is removed again when that fails.
func (c Cgroups) applyV2(name string, l Limits) error {
	var controllers []string
	var set []setting
	if l.CPUShares != nil || l.CPUQuota != nil {
		controllers = append(controllers, "cpu")
		if l.CPUShares != nil {
			set = append(set, setting{"cpu.weight", strconv.FormatUint(SharesToWeight(*l.CPUShares), 10)})
		}
		if l.CPUQuota != nil {
			quota, period := "max", strconv.Itoa(QuotaPeriod)
			if *l.CPUQuota >= 0 {
				quota = strconv.FormatInt(*l.CPUQuota, 10)
			}
			if l.CPUPeriod != nil {
				period = strconv.FormatUint(*l.CPUPeriod, 10)
			}
			set = append(set, setting{"cpu.max", quota + " " + period})
		}
	}
	if l.Memory != nil {
		controllers = append(controllers, "memory")
		set = append(set, setting{"memory.max", strconv.FormatInt(*l.Memory, 10)})
	}
	if l.Pids != nil {
		controllers = append(controllers, "pids")
		switch {
		case *l.Pids > 0:
			set = append(set, setting{"pids.max", strconv.FormatInt(*l.Pids, 10)})
		case *l.Pids < 0:
			set = append(set, setting{"pids.max", "max"})
		}
	}
	if len(l.HugePages) > 0 {
		controllers = append(controllers, "hugetlb")
		for size, limit := range l.HugePages {
			set = append(set, setting{"hugetlb." + pageSizeName(size) + ".max", strconv.FormatUint(uint64(limit), 10)})
		}
	}
	dir := filepath.Join(c.Mount, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	err := c.enableControllers(name, controllers)
	if err == nil {
		err = write(dir, set)
	}
	if err != nil {
		os.Remove(dir) // only when empty: a cgroup that was there and holds processes stays
		return err
	}
	return nil
}

// enableControllers writes "+cpu +memory …" into the subtree_control of the root and of every
// cgroup down to name's parent. Only the lowest level's error counts: a level above may refuse
// (a delegated subtree) while already having the controllers on.
func (c Cgroups) enableControllers(name string, controllers []string) error {
	if len(controllers) == 0 {
		return nil
	}
	toggles := make([]string, len(controllers))
	for i, ctrl := range controllers {
		toggles[i] = "+" + ctrl
	}
	line := strings.Join(toggles, " ")
	var err error
	dir := c.Mount
	parts := strings.Split(strings.Trim(name, "/"), "/")
	for i := range parts {
		err = writeExisting(filepath.Join(dir, "cgroup.subtree_control"), line)
		if err != nil {
			err = fmt.Errorf("enable controllers %s in %s: %w", line, dir, err)
		}
		dir = filepath.Join(dir, parts[i])
	}
	return err
}

// write writes each setting into its file in dir, in order.
func write(dir string, set []setting) error {
	for _, s := range set {
		if err := os.WriteFile(filepath.Join(dir, s.file), []byte(s.value), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeExisting writes into a file that must exist, without truncating it (the kernel's control
// files take one write each; plain files in tests keep what was written last at the start).
func writeExisting(p, value string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
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
