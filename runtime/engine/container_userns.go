package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/imagestore"
)

// A container of a pod with its own user namespace runs as ids mapped to unprivileged host ids,
// while its image's files belong to host root: through the plain overlay it could not write
// its own /etc, nor could the runtime make mount points in it. So its overlay is remounted on
// idmapped mounts of its layers (mount_setattr MOUNT_ATTR_IDMAP with the pod's user namespace):
// a file of host uid 0 is its uid 0. The rootfs path's parents must be searchable by others
// (the store makes its dirs 0711) and the container's own rootfs dir by the namespace's root
// group (the store makes it 0710 for that group), as the OCI runtime resolves it as the mapped root.

// idmapper is what an image store offers for such containers (imagestore.Store does).
type idmapper interface {
	// RootfsDir holds the containers' rootfs mounts.
	RootfsDir() string
	RemountIdmapped(containerID, usernsPath string, rootUID, rootGID int) error
}

func (s *Engine) idmapRootfs(containerID, usernsPath string, u *runtimeapi.UserNamespace) error {
	im, ok := s.cfg.Images.(idmapper)
	if !ok {
		return fmt.Errorf("the image store cannot idmap a rootfs for a user namespace: %w", errdefs.ErrFailedPrecondition)
	}
	return im.RemountIdmapped(containerID, usernsPath, int(u.GetUids()[0].GetHostId()), int(u.GetGids()[0].GetHostId()))
}

// usernsRootfsReachable reports whether a mapped root can reach the image store's rootfs dirs by
// path: the store idmaps rootfs and every dir from / down to its rootfs dir is searchable by
// others. A runtime root under a private dir (mktemp -d makes 0700) fails this, and then pods
// with their own user namespace are refused and not advertised.
func (s *Engine) usernsRootfsReachable() bool {
	im, ok := s.cfg.Images.(idmapper)
	if !ok {
		return false
	}
	return searchable(im.RootfsDir())
}

func searchable(p string) bool {
	for {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(p)
		if parent == p {
			return true
		}
		p = parent
	}
}

// A mount that carries uid_mappings and gid_mappings (the kubelet sets the pod's own on every
// mount of a pod with its own user namespace) is bound idmapped, as containerd 2 and CRI-O do:
// the pod's ids are shifted back to the host's on the way to the file system, so a volume's
// files look to the pod as they would to a pod of the host's ids (a file of host uid 0 is its
// root's), and what the pod's root writes there is written as host uid 0 writes it. The runtime
// makes the idmapped clone itself (open_tree, mount_setattr MOUNT_ATTR_IDMAP with the pod's user
// namespace), so runc and crun need no idmapped-mount support of their own: the clone is attached
// under <state>/idmapped-mounts/<container id>/<n>, bound into the container in its place, and
// detached once the OCI runtime has made the container (its mount namespace keeps its copy).

// idmappedMountsDir holds one container's attached clones while it is being created.
func (s *Engine) idmappedMountsDir(containerID string) string {
	return filepath.Join(s.cfg.State, "idmapped-mounts", containerID)
}

// idmapMounts replaces each mount of the request that carries mappings with an idmapped clone
// of its host path. Only the pod's own mappings can be applied (they are the user namespace the
// clone is mapped with), only in a pod that has one, and only with private propagation: a clone
// is a mount of its own, so nothing would propagate to or from it.
func (cc *containerCreate) idmapMounts() error {
	mounts := cc.specCfg.GetMounts()
	if !slices.ContainsFunc(mounts, hasIDMappings) {
		return nil
	}
	if cc.sb.UserNSPath == "" {
		m := mounts[slices.IndexFunc(mounts, hasIDMappings)]
		return invalid("mount %q: uid_mappings and gid_mappings need a pod with its own user namespace (userns_options mode POD)", m.GetContainerPath())
	}
	u := cc.sb.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()
	for _, m := range mounts {
		if !hasIDMappings(m) {
			continue
		}
		if !sameIDMappings(m.GetUidMappings(), u.GetUids()) || !sameIDMappings(m.GetGidMappings(), u.GetGids()) {
			return invalid("mount %q: uid_mappings and gid_mappings must be the pod's user namespace mappings", m.GetContainerPath())
		}
		if m.GetPropagation() != runtimeapi.MountPropagation_PROPAGATION_PRIVATE {
			return invalid("mount %q: propagation %s cannot be kept by an idmapped mount", m.GetContainerPath(), m.GetPropagation())
		}
		if !filepath.IsAbs(m.GetHostPath()) {
			return invalid("mount host path %q", m.GetHostPath())
		}
	}
	userns, err := os.Open(cc.sb.UserNSPath)
	if err != nil {
		return fmt.Errorf("idmap mounts: %w", err)
	}
	defer userns.Close()
	dir := cc.s.idmappedMountsDir(cc.id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	cc.undo.push(func() { cc.s.undo("detach idmapped mounts", detachIdmappedMounts(dir)) })
	out := make([]*runtimeapi.Mount, len(mounts))
	for i, m := range mounts {
		if !hasIDMappings(m) {
			out[i] = m
			continue
		}
		target := filepath.Join(dir, strconv.Itoa(i))
		if err := attachIdmappedTree(m.GetHostPath(), target, userns); err != nil {
			return fmt.Errorf("mount %q: %w", m.GetContainerPath(), err)
		}
		c := proto.Clone(m).(*runtimeapi.Mount)
		c.HostPath, c.UidMappings, c.GidMappings = target, nil, nil
		out[i] = c
	}
	if cc.specCfg == cc.cfg {
		cc.specCfg = proto.Clone(cc.cfg).(*runtimeapi.ContainerConfig)
	}
	cc.specCfg.Mounts = out
	return nil
}

// detachIdmappedClones drops the attached clones once the container holds its own copies.
func (cc *containerCreate) detachIdmappedClones() error {
	return detachIdmappedMounts(cc.s.idmappedMountsDir(cc.id))
}

func hasIDMappings(m *runtimeapi.Mount) bool {
	return len(m.GetUidMappings()) > 0 || len(m.GetGidMappings()) > 0
}

func sameIDMappings(a, b []*runtimeapi.IDMapping) bool {
	return slices.EqualFunc(a, b, func(x, y *runtimeapi.IDMapping) bool {
		return x.GetHostId() == y.GetHostId() && x.GetContainerId() == y.GetContainerId() && x.GetLength() == y.GetLength()
	})
}

// attachIdmappedTree mounts a clone of the mount tree at src (with its submounts, as the
// container's rbind would have them) on target, every mount of it idmapped by userns. A host
// path that does not exist is made a directory first, as for a plain bind.
func attachIdmappedTree(src, target string, userns *os.File) error {
	if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(src, 0o755); err != nil {
			return err
		}
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("idmap %s: open_tree: %w", src, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	// The mount point must be of the source's kind: a file (a single-file volume, /etc/hosts, the
	// termination log) is bound on a file.
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = os.Mkdir(target, 0o700)
	} else {
		var f *os.File
		if f, err = os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			err = f.Close()
		}
	}
	if err != nil {
		return err
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPERM) {
			return fmt.Errorf("%s cannot be mapped into the pod's user namespace (its file system, or that of a mount under it, does not support idmapped mounts): %v: %w",
				src, err, errdefs.ErrFailedPrecondition)
		}
		return fmt.Errorf("idmap %s: mount_setattr: %w", src, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("idmap %s: move_mount: %w", src, err)
	}
	return nil
}

// detachIdmappedMounts detaches every clone under dir and removes the mount points and dir. It
// never removes recursively: a clone still attached (a detach that failed) must not have its
// files, a volume's, deleted through it.
func detachIdmappedMounts(dir string) error {
	if err := imagestore.UnmountIdmapDir(dir); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// sweepIdmappedMounts detaches what a create cut short by a crash left attached: no container
// needs a clone after its create, and a create in flight at the crash is undone on recovery.
func (s *Engine) sweepIdmappedMounts() error {
	root := filepath.Join(s.cfg.State, "idmapped-mounts")
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		errs = append(errs, detachIdmappedMounts(filepath.Join(root, e.Name())))
	}
	return errors.Join(errs...)
}
