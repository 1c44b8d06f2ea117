package nodestatus

// Host facts, read from files rather than any network lookup.

import (
	"bufio"
	"bytes"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Capacity is the node's capacity as the Node reports it: this machine's CPUs and memory, maxPods
// pods, and as ephemeral-storage the size of the filesystem holding rootDir (the agent's root, where
// emptyDir volumes and pod files live), as the kubelet reports its root filesystem. Allocatable is
// the same for now (nothing is reserved for the system). What cannot be read is left out rather
// than reported as 0.
func Capacity(maxPods int, rootDir string) v1.ResourceList {
	c := v1.ResourceList{
		v1.ResourceCPU:  *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
		v1.ResourcePods: *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	if mem := memTotal(); mem > 0 {
		c[v1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	}
	var st unix.Statfs_t
	if rootDir != "" && unix.Statfs(rootDir, &st) == nil && st.Blocks > 0 {
		c[v1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(st.Blocks)*st.Bsize, resource.BinarySI)
	}
	return c
}

func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func nodeInfo() v1.NodeSystemInfo {
	info := v1.NodeSystemInfo{OperatingSystem: goruntime.GOOS, Architecture: goruntime.GOARCH}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		info.KernelVersion = unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				info.OSImage = strings.Trim(v, `"`)
			}
		}
	}
	if b, err := os.ReadFile("/etc/machine-id"); err == nil {
		info.MachineID = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		info.BootID = strings.TrimSpace(string(b))
	}
	return info
}
