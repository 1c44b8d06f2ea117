package oci

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/moby/sys/mountinfo"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// setMounts lays out the container's filesystem: the kernel filesystems every container has, the
// pod's shared files, the request's mounts, and empty dirs for the image's volumes.
func setMounts(s *specs.Spec, in SpecInput, privileged bool) error {
	sysOpts := []string{"nosuid", "noexec", "nodev", "ro"}
	cgOpts := []string{"nosuid", "noexec", "nodev", "relatime", "ro"}
	if privileged {
		sysOpts = sysOpts[:3]
		cgOpts = cgOpts[:4]
	}
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: sysOpts},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: cgOpts},
	}
	if in.IPCNSPath == "" && in.ShmPath == "" {
		// Host IPC: the host's /dev/shm.
		mounts = append(mounts, specs.Mount{Destination: "/dev/shm", Type: "bind", Source: "/dev/shm", Options: []string{"rbind", "nosuid", "nodev", "noexec"}})
	} else if in.ShmPath != "" {
		mounts = append(mounts, specs.Mount{Destination: "/dev/shm", Type: "bind", Source: in.ShmPath, Options: []string{"rbind", "nosuid", "nodev", "noexec"}})
	} else {
		mounts = append(mounts, specs.Mount{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}})
	}
	requested := map[string]bool{}
	for _, m := range in.Config.GetMounts() {
		requested[filepath.Clean(m.GetContainerPath())] = true
	}
	if in.SandboxDir != "" {
		for _, f := range []string{"hostname", "hosts", "resolv.conf"} {
			dst := "/etc/" + f
			src := filepath.Join(in.SandboxDir, f)
			if requested[dst] {
				continue
			}
			if _, err := os.Stat(src); err != nil {
				continue
			}
			opts := []string{"rbind", "rprivate"}
			if in.Config.GetLinux().GetSecurityContext().GetReadonlyRootfs() {
				opts = append(opts, "ro")
			} else {
				opts = append(opts, "rw")
			}
			mounts = append(mounts, specs.Mount{Destination: dst, Type: "bind", Source: src, Options: opts})
		}
	}
	rootProp := ""
	for _, m := range in.Config.GetMounts() {
		om, prop, err := criMount(m)
		if err != nil {
			return err
		}
		switch prop {
		case "rshared":
			rootProp = "rshared"
		case "rslave":
			if rootProp == "" {
				rootProp = "rslave"
			}
		}
		// A mount over a default one replaces it.
		kept := mounts[:0]
		for _, old := range mounts {
			if filepath.Clean(old.Destination) != om.Destination {
				kept = append(kept, old)
			}
		}
		mounts = append(kept, om)
	}
	s.Linux.RootfsPropagation = rootProp
	for v := range in.Image.Volumes {
		v = filepath.Clean("/" + v)
		if requested[v] {
			continue
		}
		// Image volumes become plain dirs on the writable layer (containerd's "mkdir" mode).
		p, err := securejoin.SecureJoin(in.Rootfs, v)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("image volume %q: %w", v, err)
		}
	}
	if in.UserNSPath != "" {
		if err := keepLockedFlags(mounts); err != nil {
			return err
		}
	}
	s.Mounts = mounts
	return nil
}

func criMount(m *runtimeapi.Mount) (specs.Mount, string, error) {
	dst, src := m.GetContainerPath(), m.GetHostPath()
	if !filepath.IsAbs(dst) || hasDotDot(dst) {
		return specs.Mount{}, "", fmt.Errorf("mount container path %q: %w", dst, errdefs.ErrInvalidArgument)
	}
	if m.GetImage() != nil && m.GetImage().GetImage() != "" {
		return specs.Mount{}, "", fmt.Errorf("image volume mounts are not supported: %w", errdefs.ErrInvalidArgument)
	}
	if !filepath.IsAbs(src) {
		return specs.Mount{}, "", fmt.Errorf("mount host path %q: %w", src, errdefs.ErrInvalidArgument)
	}
	if len(m.GetUidMappings()) > 0 || len(m.GetGidMappings()) > 0 {
		// The server turns mapped mounts into idmapped clones; one left here would be bound unmapped.
		return specs.Mount{}, "", fmt.Errorf("mount %q: uid_mappings and gid_mappings are not applied here: %w", dst, errdefs.ErrInvalidArgument)
	}
	if _, err := os.Stat(src); os.IsNotExist(err) {
		// The kubelet creates volume dirs; hostPath volumes of type "" expect the runtime to.
		if err := os.MkdirAll(src, 0o755); err != nil {
			return specs.Mount{}, "", err
		}
	} else if err != nil {
		return specs.Mount{}, "", err
	}
	opts := []string{"rbind"}
	prop := "rprivate"
	switch m.GetPropagation() {
	case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
		prop = "rslave"
		if err := checkPropagation(src, "shared:", "master:"); err != nil {
			return specs.Mount{}, "", err
		}
	case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
		prop = "rshared"
		if err := checkPropagation(src, "shared:"); err != nil {
			return specs.Mount{}, "", err
		}
	}
	opts = append(opts, prop)
	switch {
	case m.GetRecursiveReadOnly():
		if !m.GetReadonly() || prop != "rprivate" {
			return specs.Mount{}, "", fmt.Errorf("mount %q: recursive read-only needs readonly and private propagation: %w", dst, errdefs.ErrInvalidArgument)
		}
		opts = append(opts, "rro")
	case m.GetReadonly():
		opts = append(opts, "ro")
	default:
		opts = append(opts, "rw")
	}
	return specs.Mount{Destination: filepath.Clean(dst), Type: "bind", Source: src, Options: opts}, prop, nil
}

// checkPropagation refuses a propagating mount whose source is on a private mount: the mount
// would be made but nothing would propagate, silently. The mount holding path must carry one of
// the optional tags (shared:N, master:N).
func checkPropagation(path string, tags ...string) error {
	ms, err := mountinfo.GetMounts(mountinfo.ParentsFilter(path))
	if err != nil {
		return err
	}
	var holder *mountinfo.Info
	for _, m := range ms {
		if holder == nil || len(m.Mountpoint) >= len(holder.Mountpoint) {
			holder = m
		}
	}
	if holder == nil {
		return fmt.Errorf("no mount holds %s", path)
	}
	for _, f := range strings.Fields(holder.Optional) {
		for _, t := range tags {
			if strings.HasPrefix(f, t) {
				return nil
			}
		}
	}
	want := "shared"
	if len(tags) > 1 {
		want = "shared or a slave"
	}
	return fmt.Errorf("mount propagation for %s needs %s (the mount holding it) to be %s: %w",
		path, holder.Mountpoint, want, errdefs.ErrFailedPrecondition)
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

func deviceFromPath(path string) (*specs.LinuxDevice, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, err
	}
	var typ string
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		typ = "b"
	case unix.S_IFCHR:
		typ = "c"
	default:
		return nil, fmt.Errorf("%s is not a device", path)
	}
	mode := os.FileMode(st.Mode & 0o777)
	uid, gid := st.Uid, st.Gid
	return &specs.LinuxDevice{
		Path: path, Type: typ, Major: int64(unix.Major(uint64(st.Rdev))), Minor: int64(unix.Minor(uint64(st.Rdev))),
		FileMode: &mode, UID: &uid, GID: &gid,
	}, nil
}

// hostDevices lists the host's device nodes for a privileged container, skipping the ones a
// container gets from its own /dev (its pty, console) anyway.
func hostDevices() ([]specs.LinuxDevice, error) {
	var out []specs.LinuxDevice
	err := filepath.WalkDir("/dev", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			switch p {
			case "/dev/pts", "/dev/shm", "/dev/mqueue", "/dev/fd":
				return filepath.SkipDir
			}
			return nil
		}
		if p == "/dev/console" || p == "/dev/ptmx" || d.Type()&os.ModeDevice == 0 {
			return nil
		}
		if dev, err := deviceFromPath(p); err == nil {
			out = append(out, *dev)
		}
		return nil
	})
	return out, err
}
