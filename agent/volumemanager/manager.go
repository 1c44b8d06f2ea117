// Package volumemanager makes the host side of a pod's volumes and tears it down again: emptyDir (a
// folder, or a tmpfs for medium Memory bounded by sizeLimit), hostPath with the checks its type
// implies, secret, configMap, downwardAPI and projected volumes (apivolumes.go) written in the
// kubelet's atomic ..data layout, and the bind mounts that carry volumeMounts' subPath safely into
// containers.
//
// Layout under RootDir, as the kubelet's, so tools that know it find their way:
//
//	pods/<uid>/volumes/kubernetes.io~empty-dir/<name>        emptyDir (tmpfs mount point for Memory)
//	pods/<uid>/volumes/kubernetes.io~secret/<name>           secret, configMap, downwardAPI, projected: a tmpfs each
//	pods/<uid>/volume-subpaths/<volume>/<container>/<index>  bind mount of one volumeMount's subPath
//
// Every path is built by package podpath, so a UID or volume name that is not one path element
// fails the pod's sync before anything is made, chmodded or removed. pods, pods/<uid> and the
// folders down to each plugin's are 0750 root-owned: other users of the host cannot reach a pod's
// volumes, while containers, which get the volume folder itself bind mounted, never see them.
//
// Set up before the pod's containers start; torn down after they are gone. A pod folder whose pod
// the agent no longer knows is an orphan, removed by CleanupOrphans once nothing is mounted in it.
package volumemanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nodelet/nodelet/agent/recorder"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/agent/csi"
	"github.com/nodelet/nodelet/agent/internal/podpath"
	"github.com/nodelet/nodelet/agent/kubeclient"
)

// ErrMounted: a pod folder still holds a mount, so it is not removed (a bind mount of a host folder
// would otherwise have its content deleted).
var ErrMounted = errors.New("still mounted")

// Manager sets up, refreshes and tears down the volumes of pods.
type Manager struct {
	// RootDir holds pods/<uid>.
	RootDir string
	// Client reads secrets and config maps and requests service account tokens; nil standalone.
	Client APIObjects
	// Claims resolves persistentVolumeClaim volumes to their PVs; nil refuses them (standalone).
	Claims ClaimClient
	// Objects serves secrets and config maps: the pod objects manager with an apiserver, the
	// manifest folder without; nil reads them from Client at each use.
	Objects ObjectSource
	// Allocatable is the node's, for resourceFieldRef limits a container leaves unset; nil makes
	// such a file an error (ErrNoAllocatable) rather than a made-up 0.
	Allocatable func() v1.ResourceList
	// Mounter does mount(2) and umount(2); nil uses the kernel.
	Mounter Mounter
	Now     func() time.Time
	// Recorder gets a FailedMount event when a pod's volumes cannot be made; optional.
	Recorder recorder.Interface
	// CSI stages and publishes the CSI persistent volumes claims resolve to (*csi.Manager); nil
	// refuses them.
	CSI CSIVolumes

	// devMu orders the mounts and unmounts of local block devices' filesystems, which pods share.
	devMu  sync.Mutex
	mu     sync.Mutex
	tokens map[string]token
	claims map[types.UID]map[string]claimed // by pod, by volume name
}

// CSIVolumes are the node side of CSI (*csi.Manager).
type CSIVolumes interface {
	SetUp(ctx context.Context, pod *v1.Pod, vol csi.Volume) (csi.Published, error)
	TearDown(ctx context.Context, uid types.UID) error
	VolumeStats(ctx context.Context, published string) (*statsapi.FsStats, error)
	Expand(ctx context.Context, uid types.UID, volume string, pv *v1.PersistentVolume, size int64) (bool, error)
}

// APIObjects is the apiserver as volumes read it (a *kubeclient.Client is one).
type APIObjects interface {
	Secrets(namespace string) kubeclient.SecretInterface
	ConfigMaps(namespace string) kubeclient.ConfigMapInterface
	ServiceAccounts(namespace string) kubeclient.ServiceAccountInterface
}

// ObjectSource gives secrets and config maps (*podobjects.Manager, *DirObjects).
type ObjectSource interface {
	ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// Mounter is the part of mount(2) the manager needs, so tests can check decisions without root.
type Mounter interface {
	// MountTmpfs mounts a nosuid, nodev tmpfs of sizeBytes (0: the kernel's default) whose root has mode.
	MountTmpfs(target string, sizeBytes int64, mode os.FileMode) error
	// MountHugetlbfs mounts a nosuid, nodev hugetlbfs of pages of pageSize (a quantity: 2Mi, 1Gi).
	MountHugetlbfs(target, pageSize string) error
	// ResizeTmpfs remounts the tmpfs at target with a new size, keeping its files.
	ResizeTmpfs(target string, sizeBytes int64) error
	BindFd(fdPath, target string) error
	Unmount(target string) error
	// MountPoints lists mount points under dir (dir included), deepest first, from the mount
	// table: only for what IsMountPoint at the known places did not find.
	MountPoints(dir string) ([]string, error)
	// IsMountPoint tells whether path itself is mounted on (a final symlink is not followed).
	IsMountPoint(path string) (bool, error)
}

func (m *Manager) allocatable() v1.ResourceList {
	if m.Allocatable == nil {
		return nil
	}
	return m.Allocatable()
}

func (m *Manager) mounter() Mounter {
	if m.Mounter != nil {
		return m.Mounter
	}
	return kernelMounter{}
}

// PodDir is pods/<uid>; a UID that is not one path element is refused (podpath.ErrUnsafe).
func (m *Manager) PodDir(uid types.UID) (string, error) {
	return podpath.PodDir(m.RootDir, uid)
}

// EmptyDirPath is where an emptyDir volume of the pod lives.
func (m *Manager) EmptyDirPath(uid types.UID, name string) (string, error) {
	return podpath.VolumeDir(m.RootDir, uid, podpath.EmptyDirPlugin, name)
}

// checkNames refuses a pod whose UID or volume names cannot be path elements, before anything of
// it is made on disk.
func checkNames(pod *v1.Pod) error {
	if err := podpath.Element("pod UID", string(pod.UID)); err != nil {
		return err
	}
	for i := range pod.Spec.Volumes {
		if err := podpath.Element("volume name", pod.Spec.Volumes[i].Name); err != nil {
			return err
		}
	}
	return nil
}

// privateDir makes dir (mode 0750) or brings an existing one back to 0750; a folder made by an
// older version with 0755 is closed to other users too.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a folder", dir)
	}
	if st.Mode().Perm() == 0o750 {
		return nil
	}
	return os.Chmod(dir, 0o750)
}

// pluginDir makes pods, pods/<uid>, volumes and volumes/<plugin>, each 0750, and returns the last.
func (m *Manager) pluginDir(uid types.UID, plugin string) (string, error) {
	if err := os.MkdirAll(m.RootDir, 0o750); err != nil {
		return "", err
	}
	dirs := []func() (string, error){
		func() (string, error) { return podpath.PodsDir(m.RootDir), nil },
		func() (string, error) { return podpath.PodDir(m.RootDir, uid) },
		func() (string, error) { return podpath.VolumesDir(m.RootDir, uid) },
		func() (string, error) { return podpath.PluginDir(m.RootDir, uid, plugin) },
	}
	var dir string
	for _, d := range dirs {
		var err error
		if dir, err = d(); err != nil {
			return "", err
		}
		if err := privateDir(dir); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// SetUp makes the pod's emptyDir volumes, checks its hostPath volumes and resolves its claims. It is idempotent, so
// every sync may call it; an error names the volume and keeps the pod's containers from starting.
func (m *Manager) SetUp(ctx context.Context, pod *v1.Pod) error {
	if err := checkNames(pod); err != nil {
		return err
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		var err error
		switch {
		case v.EmptyDir != nil:
			err = m.setUpEmptyDir(pod, v)
		case v.HostPath != nil:
			err = CheckHostPath(v.HostPath)
		case v.PersistentVolumeClaim != nil, v.Ephemeral != nil:
			err = m.setUpClaim(ctx, pod, v)
		case v.CSI != nil:
			err = m.setUpInlineCSI(ctx, pod, v)
		}
		if err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return nil
}

// TearDownVolumes unmounts and removes the pod's volumes (emptyDirs on disk and in memory, API
// volumes, subPath binds) and keeps the rest of its folder (/etc/hosts, termination messages): a
// pod that finished but is not deleted gives its memory and disk back, as the kubelet's volume
// manager does once a pod has terminated; an evicted pod's emptyDir is what relieved the disk.
// Call it once the pod's containers are gone: a running container may still use them.
func (m *Manager) TearDownVolumes(uid types.UID) error {
	if err := m.Unmount(uid); err != nil {
		return err
	}
	volumes, err := podpath.VolumesDir(m.RootDir, uid)
	if err != nil {
		return err
	}
	subPaths, err := podpath.SubPathsDir(m.RootDir, uid)
	if err != nil {
		return err
	}
	for _, dir := range []string{subPaths, volumes} {
		if err := m.remove(uid, dir); err != nil {
			return err
		}
	}
	return nil
}

// Unmount releases what the volume manager mounted in the pod's folder (memory emptyDirs, API
// volumes, subPath binds) and keeps the files. It looks only where it mounts, a few statx calls
// per volume, rather than through the host's whole mount table.
func (m *Manager) Unmount(uid types.UID) error {
	dir, err := m.PodDir(uid)
	if err != nil {
		return err
	}
	var errs []error
	// subPath binds first: they may be of files inside a mounted volume.
	for _, place := range []struct {
		sub   string
		depth int
	}{{"volume-subpaths", 3}, {"volumes", 2}} {
		for _, p := range entriesAt(filepath.Join(dir, place.sub), place.depth) {
			errs = append(errs, m.unmountAll(p))
		}
	}
	// Local devices' filesystems and CSI volumes after the subPath binds, which may be of their
	// files; CSI drivers release theirs (a driver gone keeps them, and the pod's folder, until it
	// is back).
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := m.releaseLocalDevices(uid); err != nil || m.CSI == nil {
		return err
	}
	return m.CSI.TearDown(context.Background(), uid)
}

// unmountAll unmounts path until nothing is mounted there (a path mounted over twice needs two).
func (m *Manager) unmountAll(path string) error {
	for range 16 {
		mounted, err := m.mounter().IsMountPoint(path)
		if err != nil || !mounted {
			return err
		}
		if err := m.mounter().Unmount(path); err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	return fmt.Errorf("unmount %s: %w", path, ErrMounted)
}

// entriesAt lists the paths exactly depth levels below dir, descending only into folders (never
// through a symlink).
func entriesAt(dir string, depth int) []string {
	if depth == 0 {
		return []string{dir}
	}
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if depth > 1 && !e.IsDir() {
			continue
		}
		out = append(out, entriesAt(filepath.Join(dir, e.Name()), depth-1)...)
	}
	return out
}

// remove deletes dir without ever crossing a mount (removeAll). A mount where the volume manager
// puts none (one a container's Bidirectional propagation made inside a volume) is looked up in the
// mount table only then, unmounted, and the removal tried once more.
func (m *Manager) remove(uid types.UID, dir string) error {
	err := removeAll(dir)
	if !errors.Is(err, ErrMounted) {
		return err
	}
	mps, lerr := m.mounter().MountPoints(dir)
	if lerr != nil || len(mps) == 0 {
		return fmt.Errorf("pod %s: %w", uid, errors.Join(err, lerr))
	}
	for _, mp := range mps {
		if err := m.mounter().Unmount(mp); err != nil {
			return fmt.Errorf("pod %s: unmount %s: %w", uid, mp, err)
		}
	}
	if err := removeAll(dir); err != nil {
		return fmt.Errorf("pod %s: %w", uid, err)
	}
	return nil
}

// TearDown unmounts everything under the pod's folder and removes it. Call it once the pod's
// containers are gone.
func (m *Manager) TearDown(uid types.UID) error {
	dir, err := m.PodDir(uid)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := m.Unmount(uid); err != nil {
		return err
	}
	return m.remove(uid, dir)
}

// CleanupOrphans tears down the folders of pods for which keep is false (housekeeping: pods the
// agent no longer has and whose containers are surely gone). It returns the UIDs it removed;
// folders that fail stay for the next round.
func (m *Manager) CleanupOrphans(keep func(types.UID) bool) ([]types.UID, error) {
	entries, err := os.ReadDir(podpath.PodsDir(m.RootDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []types.UID
	var errs []error
	for _, e := range entries {
		uid := types.UID(e.Name())
		if !e.IsDir() || keep(uid) || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if err := m.TearDown(uid); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, uid)
	}
	return removed, errors.Join(errs...)
}
