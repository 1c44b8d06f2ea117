package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// The pod's cgroup is made with plain cgroupfs operations: a directory per hierarchy (each cgroup
// v1 hierarchy and the cgroup2 one, unified or not), which the OCI runtime then nests the
// containers' cgroups under. Limits are the kubelet's business (it writes them for the pod
// cgroups it made); the runtime only makes sure the parent exists and goes away with the pod.

var (
	cgroupRootsOnce sync.Once
	cgroupRootsList []cgroupfs.Hierarchy
	cgroupRootsErr  error
)

// cgroupRoots lists each mounted hierarchy once; mount points do not change while we run.
func cgroupRoots() ([]cgroupfs.Hierarchy, error) {
	cgroupRootsOnce.Do(func() { cgroupRootsList, cgroupRootsErr = cgroupfs.Hierarchies("/proc/self/mountinfo") })
	return cgroupRootsList, cgroupRootsErr
}

// missingCgroups lists the dirs of rel and its ancestors (parents first) that creating rel will
// make, and so what removing the pod must delete. rel itself (the pod's cgroup, gone with the
// pod) is listed when any hierarchy lacks it. An ancestor is listed only when every hierarchy
// lacks it: one the client made in some hierarchies is the client's (the agent makes its QoS
// cgroups, <root>/besteffort, in the hierarchies it writes limits to and keeps them while it
// runs), and removing it with the last pod would take it from under the client in those too;
// the runtime completes it in the others and leaves it. The daemon's own parent (keep) and its
// ancestors are never listed: pods come and go below it, and removing it with the last pod would
// race the next pod's creation.
func missingCgroups(rel, keep string) ([]string, error) {
	roots, err := cgroupRoots()
	if err != nil {
		return nil, err
	}
	var out []string
	var chain []string
	for p := rel; p != "/" && p != "."; p = path.Dir(p) {
		if p == keep || strings.HasPrefix(keep, p+"/") {
			break
		}
		chain = append([]string{p}, chain...)
	}
	for _, p := range chain {
		absent := 0
		for _, r := range roots {
			if _, err := os.Stat(filepath.Join(r.Path, p)); os.IsNotExist(err) {
				absent++
			}
		}
		if (p == rel && absent > 0) || absent == len(roots) {
			out = append(out, p)
		}
	}
	return out, nil
}

// createCgroup makes rel in every hierarchy. An ancestor removed under it by another pod's
// removal (an empty parent goes with its last pod) is made again.
func createCgroup(rel string) error {
	roots, err := cgroupRoots()
	if err != nil {
		return err
	}
	for _, r := range roots {
		for attempt := 0; ; attempt++ {
			err := mkdirCgroup(r, rel)
			if err == nil {
				break
			}
			if !errors.Is(err, fs.ErrNotExist) || attempt == 3 {
				return err
			}
		}
	}
	return nil
}

func mkdirCgroup(r cgroupfs.Hierarchy, rel string) error {
	cur := r.Path
	for _, c := range strings.Split(strings.Trim(rel, "/"), "/") {
		parent := cur
		cur = filepath.Join(cur, c)
		if err := os.Mkdir(cur, 0o755); err != nil {
			if os.IsExist(err) {
				continue
			}
			return fmt.Errorf("cgroup %s: %w", cur, err)
		}
		if err := initCgroupDir(r, parent, cur); err != nil {
			return err
		}
	}
	return nil
}

func initCgroupDir(r cgroupfs.Hierarchy, parent, dir string) error {
	switch {
	case r.Cpuset:
		return copyCpuset(parent, dir)
	case r.V2:
		// Delegate whatever the parent has, so containers below can have limits. In a hybrid
		// setup the unified hierarchy has no controllers and this is a no-op.
		b, _ := os.ReadFile(filepath.Join(parent, "cgroup.controllers"))
		for _, c := range strings.Fields(string(b)) {
			_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+"+c), 0)
		}
	}
	return nil
}

func copyCpuset(parent, dir string) error {
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		cur, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(cur)) > 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(parent, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), bytes.TrimSpace(b), 0); err != nil {
			return fmt.Errorf("cgroup %s: %s: %w", dir, f, err)
		}
	}
	return nil
}

// fillCpuset gives every cpuset cgroup from the root down to rel the CPUs and memory nodes of
// its parent where it has none (a cgroup someone else made empty), so that a process can join.
func fillCpuset(r cgroupfs.Hierarchy, rel string) error {
	cur := r.Path
	for _, c := range strings.Split(strings.Trim(rel, "/"), "/") {
		parent := cur
		cur = filepath.Join(cur, c)
		if err := copyCpuset(parent, cur); err != nil {
			return err
		}
	}
	return nil
}

// removeCgroups deletes the dirs a sandbox created, children first. The pod's cgroup and what is
// below it must go; an ancestor that another pod still uses stays.
func removeCgroups(created []string, pod string) error {
	roots, err := cgroupRoots()
	if err != nil {
		return err
	}
	for i := len(created) - 1; i >= 0; i-- {
		own := created[i] == pod || strings.HasPrefix(created[i], pod+"/")
		for _, r := range roots {
			dir := filepath.Join(r.Path, created[i])
			if !own {
				// An ancestor is busy because other pods' cgroups are below it, which no waiting
				// changes: one try. (Waiting here cost every pod removal 2 s per hierarchy.)
				_ = os.Remove(dir)
				continue
			}
			if err := rmdirCgroup(dir); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("remove cgroup %s: %w", dir, err)
			}
		}
	}
	return nil
}

// rmdirCgroup removes a cgroup dir, waiting a little while it is busy: a killed pod init whose
// parent died with a crashed daemon stays a zombie, and so a member of the cgroup, until the
// machine's pid 1 reaps it, which can take a moment.
func rmdirCgroup(dir string) error {
	wait := 5 * time.Millisecond
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := os.Remove(dir)
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// containerCgroupPrefix names a container's cgroup below its pod's: nodelet-<container id>.
const containerCgroupPrefix = "nodelet-"

// infraCgroup holds the pod's init on cgroup v2, below the pod cgroup: v2 lets no process live in
// a cgroup whose controllers are delegated to children, and the containers' cgroups are children.
const infraCgroup = "pod-init"

// addToCgroup moves pid into the pod cgroup rel in every hierarchy (into rel/pod-init on v2).
func addToCgroup(rel string, pid int) error {
	roots, err := cgroupRoots()
	if err != nil {
		return err
	}
	for _, r := range roots {
		dir := filepath.Join(r.Path, rel)
		if r.Cpuset {
			if err := fillCpuset(r, rel); err != nil {
				return err
			}
		}
		if r.V2 {
			dir = filepath.Join(dir, infraCgroup)
			if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
				return fmt.Errorf("cgroup %s: %w", dir, err)
			}
		}
		p := filepath.Join(dir, "cgroup.procs")
		if err := os.WriteFile(p, []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("join %s: %w", p, err)
		}
	}
	return nil
}
