package cgroupfs

import (
	"path"
	"strings"
)

// Driver turns a cgroup's name, its elements from the root (the kubelet's CgroupName), into the
// path of its folder in every hierarchy, the path the readers here and the writers take. Only
// the cgroupfs driver exists; a systemd one would make the same names into nested slices and
// leave everything that takes paths as it is.
type Driver interface {
	Path(name []string) string
}

// Cgroupfs is the cgroupfs driver: a name's elements are the folders below the root.
type Cgroupfs struct{}

// Path joins the elements below the root ("/" for none).
func (Cgroupfs) Path(name []string) string {
	return path.Join(append([]string{"/"}, name...)...)
}

// SplitName is the name a cgroupfs path stands for ("/kubepods/burstable" → kubepods, burstable).
func SplitName(p string) []string {
	var out []string
	for _, e := range strings.Split(p, "/") {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}
