package volumemanager

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/csi"
	"github.com/nodelet/nodelet/agent/kubeclient"
)

// ClaimClient reads the claims of pods' volumes and the PersistentVolumes they are bound to (a
// *kubeclient.Client is one).
type ClaimClient interface {
	PersistentVolumeClaims(namespace string) kubeclient.PersistentVolumeClaimInterface
	PersistentVolumes() kubeclient.PersistentVolumeInterface
}

// ErrClaim: a persistentVolumeClaim volume cannot be used (not bound, being deleted, a PV of a
// kind not supported).
var ErrClaim = errors.New("persistent volume claim")

// claimed is where a pod's persistentVolumeClaim volume is on the host.
type claimed struct {
	path     string
	readOnly bool
	// namespace and claim name the PVC; local: the PV is a local folder, whose filesystem the
	// kubelet measures for kubelet_volume_stats_* (a hostPath PV it does not); device: a local
	// PV of volumeMode Block, a device node mapped into containers, of which the kubelet
	// measures the size.
	namespace, claim string
	local, device    bool
	// csi: published by a CSI driver; later syncs leave it be, as the kubelet's actual state of
	// the world keeps a mounted volume mounted, unless republish: the driver asks to be called
	// again at each sync.
	csi, republish bool
}

// setUpClaim resolves a persistentVolumeClaim or generic ephemeral volume to its bound PV, as the
// kubelet's desired state populator does (and with its messages), and makes the PV ready for the
// pod: the hostPath and local PVs this node supports are folders of the host that containers bind.
func (m *Manager) setUpClaim(ctx context.Context, pod *v1.Pod, v *v1.Volume) error {
	claim, readOnly, ephemeral := "", false, v.Ephemeral != nil
	if ephemeral {
		// A generic ephemeral volume's claim is the one the ephemeral volume controller makes for
		// the pod, named after both; it must be the pod's (not a claim of that name made before).
		claim = pod.Name + "-" + v.Name
	} else {
		claim, readOnly = v.PersistentVolumeClaim.ClaimName, v.PersistentVolumeClaim.ReadOnly
	}
	if m.published(pod.UID, v.Name) {
		return m.expandClaim(ctx, pod, v.Name, claim)
	}
	pv, err := m.boundPV(ctx, pod, claim, ephemeral)
	if err != nil {
		return fmt.Errorf("error processing PVC %s/%s: %w", pod.Namespace, claim, err)
	}
	block := pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock
	if err := modeMatches(pod, v.Name, block); err != nil {
		return err
	}
	var path string
	republish := false
	switch {
	case block && pv.Spec.Local != nil:
		// The device itself goes to the containers that name the volume in volumeDevices.
		path = pv.Spec.Local.Path
		if err := isBlockDevice(path); err != nil {
			return fmt.Errorf("PV %s: local path: %w", pv.Name, err)
		}
	case block && pv.Spec.CSI != nil:
		if m.CSI == nil {
			return fmt.Errorf("PV %s: CSI volumes need an API server: %w", pv.Name, ErrClaim)
		}
		ro := readOnly || pv.Spec.CSI.ReadOnly
		pub, err := m.CSI.SetUp(ctx, pod, csi.Volume{Name: v.Name, PV: pv, Source: pv.Spec.CSI, ReadOnly: ro})
		if err != nil {
			return fmt.Errorf("MapVolume.SetUpDevice failed for volume %q : %w", v.Name, err)
		}
		path, readOnly, republish = pub.Path, ro, pub.Republish
	case block:
		return fmt.Errorf("PV %s has volumeMode Block: only local and CSI PVs are mapped as raw block devices on this node: %w", pv.Name, ErrClaim)
	case pv.Spec.HostPath != nil:
		if err := CheckHostPath(&v1.HostPathVolumeSource{Path: pv.Spec.HostPath.Path, Type: pv.Spec.HostPath.Type}); err != nil {
			return fmt.Errorf("PV %s: %w", pv.Name, err)
		}
		path = pv.Spec.HostPath.Path
	case pv.Spec.Local != nil:
		path = pv.Spec.Local.Path
		st, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("PV %s: local path: %w", pv.Name, err)
		}
		if st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0 {
			// Held from the mount to the claim's record, so that no release unmounts it between.
			m.devMu.Lock()
			defer m.devMu.Unlock()
			if path, err = m.mountLocalDevice(pv, readOnly); err != nil {
				return fmt.Errorf("PV %s: %w", pv.Name, err)
			}
			if err := m.markDeviceUse(pod.UID, pv.Name); err != nil {
				return fmt.Errorf("PV %s: %w", pv.Name, err)
			}
		} else if !st.IsDir() {
			return fmt.Errorf("PV %s: local path %s is neither a folder nor a block device: %w", pv.Name, path, ErrClaim)
		}
		// As the kubelet's local volume plugin: a writable local volume is given to the pod's fsGroup.
		if g := fsGroup(pod); g != nil && !readOnly {
			if err := ownTree(path, *g, fsGroupChangePolicy(pod)); err != nil {
				return fmt.Errorf("PV %s: fsGroup: %w", pv.Name, err)
			}
		}
	case pv.Spec.CSI != nil:
		if m.CSI == nil {
			return fmt.Errorf("PV %s: CSI volumes need an API server: %w", pv.Name, ErrClaim)
		}
		ro := readOnly || pv.Spec.CSI.ReadOnly
		pub, err := m.CSI.SetUp(ctx, pod, csi.Volume{Name: v.Name, PV: pv, Source: pv.Spec.CSI, ReadOnly: ro})
		if err != nil {
			return fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", v.Name, err)
		}
		if err := ownCSI(pod, pub.Path, pub.Ownership); err != nil {
			return fmt.Errorf("PV %s: %w", pv.Name, err)
		}
		path, readOnly, republish = pub.Path, ro, pub.Republish
	default:
		return fmt.Errorf("PV %s: only hostPath, local and CSI PersistentVolumes are supported on this node: %w", pv.Name, ErrClaim)
	}
	m.record(pod.UID, v.Name, claimed{path: path, readOnly: readOnly, namespace: pod.Namespace, claim: claim, local: pv.Spec.Local != nil && !block,
		device: pv.Spec.Local != nil && block, csi: pv.Spec.CSI != nil, republish: republish})
	return nil
}

// published: the pod's CSI volume is published and its driver does not ask to publish it again
// at each sync (requiresRepublish), so later syncs leave it be.
func (m *Manager) published(uid types.UID, volume string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.claims[uid][volume]
	return c.csi && !c.republish
}

func (m *Manager) record(uid types.UID, volume string, c claimed) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.claims == nil {
		m.claims = map[types.UID]map[string]claimed{}
	}
	if m.claims[uid] == nil {
		m.claims[uid] = map[string]claimed{}
	}
	m.claims[uid][volume] = c
}

// setUpInlineCSI publishes the pod's inline CSI volume, once per pod, as the kubelet's CSI plugin
// does (csi.Inline); containers bind it as they bind a claimed volume.
func (m *Manager) setUpInlineCSI(ctx context.Context, pod *v1.Pod, v *v1.Volume) error {
	if m.published(pod.UID, v.Name) {
		return nil
	}
	if m.CSI == nil {
		return fmt.Errorf("inline CSI volumes need an API server: %w", ErrClaim)
	}
	vol := csi.Inline(pod, v)
	pub, err := m.CSI.SetUp(ctx, pod, vol)
	if err != nil {
		return fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", v.Name, err)
	}
	if err := ownCSI(pod, pub.Path, pub.Ownership); err != nil {
		return err
	}
	m.record(pod.UID, v.Name, claimed{path: pub.Path, readOnly: vol.ReadOnly, namespace: pod.Namespace, csi: true, republish: pub.Republish})
	return nil
}

// ownCSI gives a published CSI volume to the pod's fsGroup when the driver leaves that to the node.
func ownCSI(pod *v1.Pod, target string, ownership bool) error {
	g := fsGroup(pod)
	if g == nil || !ownership {
		return nil
	}
	if err := ownTree(target, *g, fsGroupChangePolicy(pod)); err != nil {
		return fmt.Errorf("fsGroup: %w", err)
	}
	return nil
}

// modeMatches refuses, with the kubelet's messages, a claim a container uses other than its
// volumeMode says: a Block PV in volumeMounts, a Filesystem one in volumeDevices.
func modeMatches(pod *v1.Pod, name string, block bool) error {
	mode := v1.PersistentVolumeFilesystem
	if block {
		mode = v1.PersistentVolumeBlock
	}
	var mounted, mapped bool
	visit := func(mounts []v1.VolumeMount, devices []v1.VolumeDevice) {
		for _, m := range mounts {
			mounted = mounted || m.Name == name
		}
		for _, d := range devices {
			mapped = mapped || d.Name == name
		}
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			visit(list[i].VolumeMounts, list[i].VolumeDevices)
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		visit(pod.Spec.EphemeralContainers[i].VolumeMounts, pod.Spec.EphemeralContainers[i].VolumeDevices)
	}
	switch {
	case mounted && block:
		return fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeMounts", name, mode)
	case mapped && !block:
		return fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeDevices", name, mode)
	}
	return nil
}

// isBlockDevice: path is (or links to) a block device node.
func isBlockDevice(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeDevice == 0 || st.Mode()&os.ModeCharDevice != 0 {
		return fmt.Errorf("%s is not a block device: %w", path, ErrClaim)
	}
	return nil
}

// boundPV is the PV the claim is bound to, checked to be bound to it in turn; an ephemeral
// volume's claim must also be owned by the pod.
func (m *Manager) boundPV(ctx context.Context, pod *v1.Pod, claim string, ephemeral bool) (*v1.PersistentVolume, error) {
	if m.Claims == nil {
		return nil, fmt.Errorf("a persistentVolumeClaim needs an API server: %w", ErrClaim)
	}
	pvc, err := m.Claims.PersistentVolumeClaims(pod.Namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to fetch PVC from API server: %w", err)
	}
	if ephemeral && !metav1.IsControlledBy(pvc, pod) {
		return nil, fmt.Errorf("PVC %s/%s was not created for pod %s/%s (pod is not owner): %w", pvc.Namespace, pvc.Name, pod.Namespace, pod.Name, ErrClaim)
	}
	switch {
	case pvc.DeletionTimestamp != nil:
		return nil, fmt.Errorf("PVC is being deleted: %w", ErrClaim)
	case pvc.Status.Phase != v1.ClaimBound:
		return nil, fmt.Errorf("PVC is not bound: %w", ErrClaim)
	case pvc.Spec.VolumeName == "":
		return nil, fmt.Errorf("PVC has empty pvc.Spec.VolumeName: %w", ErrClaim)
	}
	pv, err := m.Claims.PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to fetch PV %s from API server: %w", pvc.Spec.VolumeName, err)
	}
	switch {
	case pv.Spec.ClaimRef == nil:
		return nil, fmt.Errorf("found PV object %s but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim: %w", pv.Name, ErrClaim)
	case pv.Spec.ClaimRef.UID != pvc.UID:
		return nil, fmt.Errorf("found PV object %s but its pv.Spec.ClaimRef.UID %s does not point to claim.UID %s: %w", pv.Name, pv.Spec.ClaimRef.UID, pvc.UID, ErrClaim)
	}
	return pv, nil
}

// ClaimPath is where the pod's persistentVolumeClaim volume is on the host and whether the pod
// claims it read-only; false until Prepare resolved it.
func (m *Manager) ClaimPath(pod *v1.Pod, name string) (path string, readOnly, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.claims[pod.UID][name]
	return c.path, c.readOnly, ok
}

func fsGroupChangePolicy(pod *v1.Pod) v1.PodFSGroupChangePolicy {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroupChangePolicy != nil {
		return *sc.FSGroupChangePolicy
	}
	return v1.FSGroupChangeAlways
}

// ownTree gives the tree at root to group gid as the kubelet's SetVolumeOwnership does: every
// entry's group, owner and group read and write (and search, and setgid on folders) added;
// symlinks get their group only and are never followed. OnRootMismatch skips a tree whose root is
// already so. Each entry is opened below the root with no symlink on the way (openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) and changed through that descriptor: a pod sharing the
// volume that swaps a folder for a symlink during the walk cannot send a chown or chmod to a host
// file.
func ownTree(root string, gid int64, policy v1.PodFSGroupChangePolicy) error {
	if policy == v1.FSGroupChangeOnRootMismatch {
		if st, err := os.Lstat(root); err == nil && ownedBy(st, gid) {
			return nil
		}
	}
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(rootFd)
	return filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fd, err := unix.Openat2(rootFd, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS})
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		defer unix.Close(fd)
		if err := unix.Fchownat(fd, "", -1, int(gid), unix.AT_EMPTY_PATH); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return nil
		}
		mode := st.Mode&0o7777 | 0o660
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			mode |= 0o110 | unix.S_ISGID
		}
		if mode == st.Mode&0o7777 {
			return nil
		}
		// chmod has no "this descriptor" form for an O_PATH one but its /proc link.
		if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return nil
	})
}

// ownedBy tells the root of a volume already has group gid, owner and group read, write and
// search, and setgid: what ownTree would make of it.
func ownedBy(st os.FileInfo, gid int64) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	want := os.FileMode(0o770) | os.ModeSetgid
	return ok && int64(sys.Gid) == gid && st.Mode()&want == want
}
