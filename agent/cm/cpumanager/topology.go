package cpumanager

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// CPU is one logical CPU and where it sits.
type CPU struct {
	ID, Core, Socket, NUMANode int
}

// Topology is the machine's online CPUs, read from sysfs once at start (the kubelet does not
// follow CPU hotplug either: a changed set makes the checkpoint refuse the next start).
type Topology struct {
	CPUs []CPU
}

// ReadTopology reads the online CPUs under sysfs (/sys): each one's core and socket, and NUMA
// node (0 where the kernel has no NUMA support).
func ReadTopology(sysfs string) (*Topology, error) {
	online, err := readCPUList(filepath.Join(sysfs, "devices/system/cpu/online"))
	if err != nil {
		return nil, fmt.Errorf("online CPUs: %w", err)
	}
	node := map[int]int{}
	nodes, _ := filepath.Glob(filepath.Join(sysfs, "devices/system/node/node[0-9]*"))
	for _, dir := range nodes {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "node"))
		if err != nil {
			continue
		}
		cpus, err := readCPUList(filepath.Join(dir, "cpulist"))
		if err != nil {
			return nil, fmt.Errorf("NUMA node %d: %w", id, err)
		}
		for _, c := range cpus.List() {
			node[c] = id
		}
	}
	t := &Topology{}
	for _, id := range online.List() {
		dir := filepath.Join(sysfs, "devices/system/cpu", "cpu"+strconv.Itoa(id), "topology")
		core, err := readInt(filepath.Join(dir, "core_id"))
		if err != nil {
			return nil, fmt.Errorf("cpu %d: %w", id, err)
		}
		socket, err := readInt(filepath.Join(dir, "physical_package_id"))
		if err != nil {
			return nil, fmt.Errorf("cpu %d: %w", id, err)
		}
		t.CPUs = append(t.CPUs, CPU{ID: id, Core: core, Socket: socket, NUMANode: node[id]})
	}
	if len(t.CPUs) == 0 {
		return nil, fmt.Errorf("no online CPU under %s", sysfs)
	}
	return t, nil
}

func readCPUList(path string) (cpuset.CPUSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return cpuset.New(), err
	}
	return cpuset.Parse(strings.TrimSpace(string(b)))
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// All is every online CPU.
func (t *Topology) All() cpuset.CPUSet {
	ids := make([]int, len(t.CPUs))
	for i, c := range t.CPUs {
		ids[i] = c.ID
	}
	return cpuset.New(ids...)
}

// core identifies a physical core: core IDs repeat across sockets.
type core struct{ socket, id int }

func (t *Topology) coreOf(cpu int) core {
	for _, c := range t.CPUs {
		if c.ID == cpu {
			return core{c.Socket, c.Core}
		}
	}
	return core{-1, -1}
}

// CPUsPerCore is the number of hardware threads of a core (1 without SMT).
func (t *Topology) CPUsPerCore() int {
	n := map[core]int{}
	most := 1
	for _, c := range t.CPUs {
		k := core{c.Socket, c.Core}
		n[k]++
		most = max(most, n[k])
	}
	return most
}

// NUMANodes is the number of NUMA nodes the online CPUs are on.
func (t *Topology) NUMANodes() int {
	n := map[int]bool{}
	for _, c := range t.CPUs {
		n[c.NUMANode] = true
	}
	return len(n)
}

// groups returns the free CPUs of each group (by key), the groups ordered by key.
func (t *Topology) groups(free cpuset.CPUSet, key func(CPU) core) (keys []core, members map[core][]int, size map[core]int) {
	members, size = map[core][]int{}, map[core]int{}
	for _, c := range t.CPUs {
		k := key(c)
		if _, ok := size[k]; !ok {
			keys = append(keys, k)
		}
		size[k]++
		if free.Contains(c.ID) {
			members[k] = append(members[k], c.ID)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].socket != keys[j].socket {
			return keys[i].socket < keys[j].socket
		}
		return keys[i].id < keys[j].id
	})
	return keys, members, size
}

// take chooses n CPUs of free so that a container shares as little as possible with others:
// whole free sockets first, then whole free cores, then single CPUs packed onto the cores (and
// sockets) that have the fewest free CPUs left, keeping whole cores free for later requests.
// Ties go to the lowest IDs, so the same state always gives the same answer.
func (t *Topology) take(free cpuset.CPUSet, n int) (cpuset.CPUSet, error) {
	if n > free.Size() {
		return cpuset.New(), fmt.Errorf("not enough cpus available to satisfy request: requested=%d, available=%d", n, free.Size())
	}
	picked := cpuset.New()
	takeWhole := func(key func(CPU) core) {
		keys, members, size := t.groups(free.Difference(picked), key)
		// Pack: groups on the sockets with the fewest free CPUs first.
		onSocket := map[int]int{}
		for _, k := range keys {
			onSocket[k.socket] += len(members[k])
		}
		sort.SliceStable(keys, func(i, j int) bool { return onSocket[keys[i].socket] < onSocket[keys[j].socket] })
		for _, k := range keys {
			if len(members[k]) == size[k] && size[k] <= n-picked.Size() {
				picked = picked.Union(cpuset.New(members[k]...))
			}
		}
	}
	takeWhole(func(c CPU) core { return core{c.Socket, -1} })
	takeWhole(func(c CPU) core { return core{c.Socket, c.Core} })
	for picked.Size() < n {
		rest := free.Difference(picked)
		freeOnCore, freeOnSocket := map[core]int{}, map[int]int{}
		for _, id := range rest.List() {
			k := t.coreOf(id)
			freeOnCore[k]++
			freeOnSocket[k.socket]++
		}
		ids := rest.List()
		sort.SliceStable(ids, func(i, j int) bool {
			ki, kj := t.coreOf(ids[i]), t.coreOf(ids[j])
			if freeOnSocket[ki.socket] != freeOnSocket[kj.socket] {
				return freeOnSocket[ki.socket] < freeOnSocket[kj.socket]
			}
			if freeOnCore[ki] != freeOnCore[kj] {
				return freeOnCore[ki] < freeOnCore[kj]
			}
			return ids[i] < ids[j]
		})
		picked = picked.Union(cpuset.New(ids[0]))
	}
	return picked, nil
}

// freeCores are the CPUs of the cores all of whose CPUs are in free.
func (t *Topology) freeCores(free cpuset.CPUSet) cpuset.CPUSet {
	keys, members, size := t.groups(free, func(c CPU) core { return core{c.Socket, c.Core} })
	out := cpuset.New()
	for _, k := range keys {
		if len(members[k]) == size[k] {
			out = out.Union(cpuset.New(members[k]...))
		}
	}
	return out
}
