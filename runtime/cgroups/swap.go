package cgroups

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// SwapAccounting reports whether the memory controller accounts swap, so that a swap limit can be
// written at all: v1 has memory.memsw.* only when the kernel accounts swap (CONFIG_MEMCG_SWAP, not
// turned off by swapaccount=0), and v2 has memory.swap.* in every cgroup but the root under the same
// condition, so the daemon's own cgroup is looked at, as containerd and the kubelet do. Without it a
// runtime can bound a container's memory but not its swap.
func SwapAccounting() bool {
	swapMode.once.Do(func() { swapMode.on = swapAccounting(Root, "/proc/self/cgroup", Unified()) })
	return swapMode.on
}

var swapMode struct {
	once sync.Once
	on   bool
}

func swapAccounting(root, selfCgroup string, unified bool) bool {
	p := filepath.Join(root, "memory", "memory.memsw.limit_in_bytes")
	if unified {
		b, err := os.ReadFile(selfCgroup)
		if err != nil {
			return false
		}
		own := ""
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "0::"); ok {
				own = rest
				break
			}
		}
		if own == "" {
			return false
		}
		p = filepath.Join(root, filepath.Clean("/"+own), "memory.swap.max")
	}
	_, err := os.Stat(p)
	return err == nil
}
