package cm

// MemoryUsage is the cgroup's memory usage in bytes (memory.current on cgroup v2,
// memory.usage_in_bytes on v1), page cache included, as the kubelet's usage figure.
func (c Cgroups) MemoryUsage(name string) (int64, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	m, err := c.FS().Memory(name)
	if err != nil {
		return 0, err
	}
	return int64(m.Usage), nil
}
