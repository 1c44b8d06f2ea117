package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/internal/podpath"
)

// emptyDirPath is the emptyDir's folder, which the volume manager made; without one (tests, a
// bare runtime manager) it is made here, under parents closed to other users of the host.
func (m *Manager) emptyDirPath(pod *v1.Pod, name string) (string, error) {
	if m.RootDir == "" {
		return "", errors.New("emptyDir needs a root dir")
	}
	host, err := podpath.VolumeDir(m.RootDir, pod.UID, podpath.EmptyDirPlugin, name)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(host), 0o750); err != nil {
		return "", err
	}
	if err := os.Mkdir(host, 0o777); errors.Is(err, os.ErrExist) {
		return host, nil
	} else if err != nil {
		return "", err
	}
	// Containers running as any user write there, as with the kubelet; Mkdir's mode passed the umask.
	return host, os.Chmod(host, 0o777)
}

// makeMounts maps volumeMounts to host paths: emptyDir under the root dir, hostPath as is, the
// volume manager's folders for the rest; a subPath (or subPathExpr, expanded with the container's
// env) becomes a bind mount the volume manager made of the opened path. An image volume has no host
// path: its mount names the pulled image (in imageVols) for the runtime to mount read-only, and
// its subPath a folder of the image.
func (m *Manager) makeMounts(ctx context.Context, pod *v1.Pod, c *v1.Container, env map[string]string, imageVols imageVolumes) ([]*runtimeapi.Mount, error) {
	vols := map[string]*v1.Volume{}
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var out []*runtimeapi.Mount
	for i, vm := range c.VolumeMounts {
		vol, ok := vols[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volume mount %q: no such volume", vm.Name)
		}
		if err := podpath.Element("volume name", vol.Name); err != nil {
			return nil, err
		}
		var host string
		var image *runtimeapi.ImageSpec
		switch {
		case vol.Image != nil:
			if image = imageVols[vol.Name]; image == nil {
				return nil, fmt.Errorf("volume %q: image %q is not pulled", vol.Name, vol.Image.Reference)
			}
			vm.ReadOnly = true
		case vol.EmptyDir != nil:
			var err error
			if host, err = m.emptyDirPath(pod, vol.Name); err != nil {
				return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
			}
		case vol.HostPath != nil:
			host = vol.HostPath.Path
			if t := vol.HostPath.Type; t != nil && *t == v1.HostPathDirectoryOrCreate {
				if err := os.MkdirAll(host, 0o755); err != nil {
					return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
				}
			}
		case vol.PersistentVolumeClaim != nil, vol.Ephemeral != nil, vol.CSI != nil:
			p, readOnly, ok := "", false, false
			if m.Volumes != nil {
				p, readOnly, ok = m.Volumes.ClaimPath(pod, vol.Name)
			}
			if !ok {
				return nil, fmt.Errorf("volume %q: its claim is not set up", vol.Name)
			}
			host = p
			vm.ReadOnly = vm.ReadOnly || readOnly
		default:
			p, ok := "", false
			if m.Volumes != nil {
				p, ok = m.Volumes.Path(pod, vol.Name)
			}
			if !ok {
				return nil, fmt.Errorf("volume %q: unsupported volume type (emptyDir, hostPath, persistentVolumeClaim, ephemeral, csi, image, secret, configMap, downwardAPI and projected are)", vol.Name)
			}
			host = p
			// API-backed volumes are read-only in the container, as with the kubelet.
			vm.ReadOnly = true
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expandVars(vm.SubPathExpr, env)
		}
		if sub != "" && image != nil {
			if err := imageVolumeSubPath(sub); err != nil {
				return nil, fmt.Errorf("volume mount %q: %w", vm.Name, err)
			}
		} else if sub != "" {
			if m.SubPaths == nil {
				return nil, fmt.Errorf("volume mount %q: subPath needs the volume manager", vm.Name)
			}
			p, err := m.SubPaths.SubPath(pod, c.Name, i, vol.Name, host, sub)
			if err != nil {
				return nil, fmt.Errorf("volume mount %q: %w", vm.Name, err)
			}
			host = p
		}
		rro, err := m.recursiveReadOnly(ctx, pod, c.VolumeMounts[i])
		if err != nil {
			return nil, err
		}
		mnt := &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: host, Readonly: vm.ReadOnly, RecursiveReadOnly: rro}
		if image != nil {
			mnt.Image, mnt.ImageSubPath = image, sub
		}
		if vm.MountPropagation != nil {
			switch *vm.MountPropagation {
			case v1.MountPropagationHostToContainer:
				mnt.Propagation = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
			case v1.MountPropagationBidirectional:
				mnt.Propagation = runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
			}
		}
		out = append(out, mnt)
	}
	return out, nil
}
