package cm

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MemoryUsage is the cgroup's memory usage in bytes (memory.current on cgroup v2,
// memory.usage_in_bytes on v1), page cache included, as the kubelet's usage figure.
func (c Cgroups) MemoryUsage(name string) (int64, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	file := filepath.Join(c.Mount, "memory", name, "memory.usage_in_bytes")
	if c.Unified {
		file = filepath.Join(c.Mount, name, "memory.current")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	return v, nil
}
