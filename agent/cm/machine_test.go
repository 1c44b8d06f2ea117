package cm

import (
	v1 "k8s.io/api/core/v1"
	"os"
	"path/filepath"
	"testing"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, body := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeMachine has 4 CPUs, 8Gi, 512 2Mi pages and no 1Gi ones, pid_max 4194304 and threads-max 63000.
func fakeMachine(t *testing.T) Machine {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"proc/meminfo":                "MemTotal:        8388608 kB\nMemFree:         1000 kB\n",
		"proc/sys/kernel/pid_max":     "4194304\n",
		"proc/sys/kernel/threads-max": "63000\n",
		"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages":    "512\n",
		"sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages": "0\n",
	})
	return Machine{Proc: filepath.Join(dir, "proc"), Sys: filepath.Join(dir, "sys"), CPUs: 4}
}

func TestMachineCapacity(t *testing.T) {
	root := t.TempDir()
	capacity, internal, err := fakeMachine(t).Capacity(50, root)
	if err != nil {
		t.Fatal(err)
	}
	eph := capacity["ephemeral-storage"]
	if eph.Value() <= 0 {
		t.Errorf("ephemeral-storage of %s: %s", root, eph.String())
	}
	delete(capacity, "ephemeral-storage")
	if want := rl("cpu", "4", "memory", "8Gi", "pods", "50", "hugepages-2Mi", "1Gi", "hugepages-1Gi", "0"); !same(capacity, want) {
		t.Errorf("capacity %s, want %s", show(capacity), show(want))
	}
	if pid := internal[ResourcePID]; pid.Value() != 63000 {
		t.Errorf("pid %s, want threads-max 63000 (the smaller)", pid.String())
	}
	if _, ok := capacity[ResourcePID]; ok {
		t.Error("pid is internal: the Node does not report it")
	}
}

func TestMachineCapacityErrors(t *testing.T) {
	m := fakeMachine(t)
	// Not made yet: the filesystem it will be made on.
	root := t.TempDir()
	want, _ := fsSize(root)
	c, _, err := m.Capacity(10, filepath.Join(root, "agent", "root"))
	if q := c[v1.ResourceEphemeralStorage]; err != nil || q.Value() != want || want <= 0 {
		t.Errorf("root dir to be made: %v %s, want %d", err, q.String(), want)
	}
	file := filepath.Join(root, "file")
	writeFiles(t, root, map[string]string{"file": ""})
	if _, _, err := m.Capacity(10, filepath.Join(file, "root")); err == nil {
		t.Error("a root dir that cannot be measured is an error, not a missing resource")
	}
	m.Proc = t.TempDir()
	if _, _, err := m.Capacity(10, ""); err == nil {
		t.Error("no meminfo: error")
	}
}

// This host, read for real: what the Node will report here.
func TestHostCapacity(t *testing.T) {
	capacity, internal, err := Machine{}.Capacity(110, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cpu", "memory", "pods", "ephemeral-storage"} {
		if q, ok := capacity[v1.ResourceName(name)]; !ok || q.Sign() <= 0 {
			t.Errorf("%s: %v", name, capacity)
		}
	}
	if q := internal[ResourcePID]; q.Value() <= 0 {
		t.Errorf("pid: %v", internal)
	}
	if _, err := os.Stat("/sys/kernel/mm/hugepages/hugepages-2048kB"); err == nil {
		if _, ok := capacity["hugepages-2Mi"]; !ok {
			t.Errorf("2Mi pages exist here but capacity has none: %v", capacity)
		}
	}
}
