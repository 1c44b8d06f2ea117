package cgroupfs

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// Paths is where a process sits in each hierarchy, as /proc/<pid>/cgroup lists it.
type Paths struct {
	// Unified is the path of the "0::" line: the cgroup2 hierarchy's (unified or hybrid); "" when
	// there is none.
	Unified string
	// V1 maps each v1 controller to its path; a co-mounted "cpu,cpuacct" line gives both.
	V1 map[string]string
}

// ParseProcCgroup reads the lines of a /proc/<pid>/cgroup file
// ("hierarchy-ID:controller-list:path").
func ParseProcCgroup(b []byte) Paths {
	p := Paths{V1: map[string]string{}}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			if p.Unified == "" {
				p.Unified = parts[2]
			}
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			if ctrl != "" {
				p.V1[ctrl] = parts[2]
			}
		}
	}
	return p
}

// Path is where the process sits in f's hierarchy holding ctrl.
func (p Paths) Path(f FS, ctrl string) string {
	if f.Unified() {
		return p.Unified
	}
	return p.V1[ctrl]
}

// SwapAccounting reports whether the memory controller accounts swap, so that a swap limit can be
// written at all: v1 has memory.memsw.* only when the kernel accounts swap (CONFIG_MEMCG_SWAP, not
// turned off by swapaccount=0); v2 has memory.swap.* in every cgroup but the root under the same
// condition, so the process's own cgroup is looked at (selfCgroup is its /proc/<pid>/cgroup), as
// containerd and the kubelet do.
func (f FS) SwapAccounting(selfCgroup string) bool {
	p := filepath.Join(f.Mount, "memory", "memory.memsw.limit_in_bytes")
	if f.Unified() {
		b, err := os.ReadFile(selfCgroup)
		if err != nil {
			return false
		}
		own := ParseProcCgroup(b).Unified
		if own == "" {
			return false
		}
		p = filepath.Join(f.Mount, filepath.Clean("/"+own), "memory.swap.max")
	}
	_, err := os.Stat(p)
	return err == nil
}

// Hierarchy is one mounted cgroup hierarchy.
type Hierarchy struct {
	Path string // its mount point
	V2   bool   // cgroup2, unified or (on a hybrid host) beside the v1 ones
	// Cpuset: a v1 hierarchy with the cpuset controller, whose new cgroups start with no CPUs
	// and memory nodes, so no process can join them until they are filled in.
	Cpuset bool
}

// Hierarchies lists each hierarchy mounted at its root once, from a mountinfo file
// (/proc/self/mountinfo): a hierarchy bind-mounted again elsewhere is listed once.
func Hierarchies(mountinfo string) ([]Hierarchy, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []Hierarchy
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, fl := range fields {
			if fl == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+3 >= len(fields) || fields[3] != "/" {
			continue
		}
		fstype, superOpts := fields[sep+1], fields[sep+3]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		// A hierarchy mounted twice shows the same super options.
		key := fstype + " " + superOpts
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, Hierarchy{
			Path:   fields[4],
			V2:     fstype == "cgroup2",
			Cpuset: fstype == "cgroup" && hasOpt(superOpts, "cpuset"),
		})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted")
	}
	return out, nil
}

func hasOpt(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}
