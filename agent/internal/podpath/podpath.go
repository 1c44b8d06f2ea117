// Package podpath builds every host path the agent derives from a pod: its folder from the UID, its
// volumes' folders from their names, subPath mount points, and its log folder
// <namespace>_<name>_<uid>. Each value taken from a pod must be exactly one clean path element;
// anything else is refused with ErrUnsafe rather than cleaned, because a cleaned "../../x" is still
// a path the pod chose outside the agent's folders (a UID of "../../../etc" once made the agent
// create and later remove a host folder).
package podpath

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// ErrUnsafe: a pod-supplied value is not one clean path element.
var ErrUnsafe = errors.New("not a single path element")

// Layout under the agent's root dir, as the kubelet's.
const (
	podsDir        = "pods"
	volumesDir     = "volumes"
	subPathsDir    = "volume-subpaths"
	containersDir  = "containers"
	etcHostsFile   = "etc-hosts"
	EmptyDirPlugin = "kubernetes.io~empty-dir"
)

// Element returns nil when s can name one entry of a folder: not empty, not "." or "..", and
// without "/" or NUL. what names the field in the error ("pod UID", "volume name").
func Element(what, s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\x00") {
		return fmt.Errorf("%s %q: %w", what, s, ErrUnsafe)
	}
	return nil
}

// PodsDir is <root>/pods, the parent of every pod's folder.
func PodsDir(root string) string {
	return filepath.Join(root, podsDir)
}

// PodDir is <root>/pods/<uid>.
func PodDir(root string, uid types.UID) (string, error) {
	if err := Element("pod UID", string(uid)); err != nil {
		return "", err
	}
	return filepath.Join(root, podsDir, string(uid)), nil
}

// VolumesDir is <root>/pods/<uid>/volumes.
func VolumesDir(root string, uid types.UID) (string, error) {
	dir, err := PodDir(root, uid)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, volumesDir), nil
}

// PluginDir is <root>/pods/<uid>/volumes/<plugin>, e.g. kubernetes.io~secret.
func PluginDir(root string, uid types.UID, plugin string) (string, error) {
	dir, err := VolumesDir(root, uid)
	if err != nil {
		return "", err
	}
	if err := Element("volume plugin", plugin); err != nil {
		return "", err
	}
	return filepath.Join(dir, plugin), nil
}

// VolumeDir is <root>/pods/<uid>/volumes/<plugin>/<name>.
func VolumeDir(root string, uid types.UID, plugin, name string) (string, error) {
	dir, err := PluginDir(root, uid, plugin)
	if err != nil {
		return "", err
	}
	if err := Element("volume name", name); err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// SubPathsDir is <root>/pods/<uid>/volume-subpaths, below which every subPath mount point is.
func SubPathsDir(root string, uid types.UID) (string, error) {
	dir, err := PodDir(root, uid)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, subPathsDir), nil
}

// SubPathDir is <root>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>, the mount point of
// one volumeMount's subPath.
func SubPathDir(root string, uid types.UID, volume, container string, index int) (string, error) {
	dir, err := PodDir(root, uid)
	if err != nil {
		return "", err
	}
	if err := Element("volume name", volume); err != nil {
		return "", err
	}
	if err := Element("container name", container); err != nil {
		return "", err
	}
	return filepath.Join(dir, subPathsDir, volume, container, strconv.Itoa(index)), nil
}

// ContainerDir is <root>/pods/<uid>/containers/<container>, which holds the termination message
// file of each of the container's instances.
func ContainerDir(root string, uid types.UID, container string) (string, error) {
	dir, err := PodDir(root, uid)
	if err != nil {
		return "", err
	}
	if err := Element("container name", container); err != nil {
		return "", err
	}
	return filepath.Join(dir, containersDir, container), nil
}

// TerminationMessageFile is <root>/pods/<uid>/containers/<container>/<file>, one instance's
// termination message file.
func TerminationMessageFile(root string, uid types.UID, container, file string) (string, error) {
	dir, err := ContainerDir(root, uid, container)
	if err != nil {
		return "", err
	}
	if err := Element("termination message file", file); err != nil {
		return "", err
	}
	return filepath.Join(dir, file), nil
}

// EtcHostsFile is <root>/pods/<uid>/etc-hosts, the hosts file mounted at /etc/hosts in the pod's
// containers.
func EtcHostsFile(root string, uid types.UID) (string, error) {
	dir, err := PodDir(root, uid)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, etcHostsFile), nil
}

// LogDir is <logRoot>/<namespace>_<name>_<uid>, the upstream layout of /var/log/pods.
func LogDir(logRoot, namespace, name string, uid types.UID) (string, error) {
	for _, e := range []struct{ what, v string }{{"pod namespace", namespace}, {"pod name", name}, {"pod UID", string(uid)}} {
		if err := Element(e.what, e.v); err != nil {
			return "", err
		}
	}
	return filepath.Join(logRoot, namespace+"_"+name+"_"+string(uid)), nil
}

// ContainerLogDir is <podLogDir>/<container>.
func ContainerLogDir(podLogDir, container string) (string, error) {
	if err := Element("container name", container); err != nil {
		return "", err
	}
	return filepath.Join(podLogDir, container), nil
}
