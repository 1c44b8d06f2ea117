package oci

import (
	"fmt"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// keepLockedFlags adds to each bind mount of a container in its own user namespace the flags of
// the mount its source lies on that the kernel locks there: nosuid, nodev, noexec and the atime
// setting. Copied into a mount namespace owned by a user namespace, a mount keeps them for good,
// and the OCI runtime's remount of a bind (to make it read-only, say) must repeat them or fail
// with EPERM: a secret's tmpfs is nosuid,nodev,noexec. runc 1.2 finds them itself; runc 1.1 and
// crun 1.8 do not.
func keepLockedFlags(mounts []specs.Mount) error {
	for i := range mounts {
		m := &mounts[i]
		if m.Type != "bind" {
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(m.Source, &st); err != nil {
			return fmt.Errorf("mount %s: %w", m.Destination, err)
		}
		add := func(opt string) {
			if !slices.Contains(m.Options, opt) {
				m.Options = append(m.Options, opt)
			}
		}
		for _, f := range []struct {
			bit int64
			opt string
		}{{unix.ST_NOSUID, "nosuid"}, {unix.ST_NODEV, "nodev"}, {unix.ST_NOEXEC, "noexec"}, {unix.ST_NODIRATIME, "nodiratime"}} {
			if st.Flags&f.bit != 0 {
				add(f.opt)
			}
		}
		// relatime is what a remount that names no atime setting asks for.
		switch {
		case st.Flags&unix.ST_NOATIME != 0:
			add("noatime")
		case st.Flags&unix.ST_RELATIME == 0:
			add("strictatime")
		}
	}
	return nil
}
