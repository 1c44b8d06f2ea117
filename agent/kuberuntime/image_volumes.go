package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/images"
	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// imageVolumes are the pulled images of a container's image volumes, by volume name: what its CRI
// mounts name in Mount.image for the runtime to mount read-only.
type imageVolumes map[string]*runtimeapi.ImageSpec

// pullImageVolumes makes sure the images of the image volumes c mounts are present, each pulled as
// its pullPolicy says through the image manager (pull secrets, back-off, Pulling/Pulled/Failed
// events), as the kubelet does before it starts a container. A volume that cannot be had gets the
// kubelet's "Error: <reason>" event and keeps the container from starting, waiting with that
// reason (ErrImagePull, ImagePullBackOff, ErrImageNeverPull, InvalidImageName); the other volumes
// are still tried, and the last failure is returned.
func (m *Manager) pullImageVolumes(ctx context.Context, pod *v1.Pod, c *v1.Container, sandboxCfg *runtimeapi.PodSandboxConfig) (imageVolumes, error) {
	sources := map[string]*v1.ImageVolumeSource{}
	for i := range pod.Spec.Volumes {
		if v := &pod.Spec.Volumes[i]; v.Image != nil {
			sources[v.Name] = v.Image
		}
	}
	if len(sources) == 0 {
		return nil, nil
	}
	out := imageVolumes{}
	var last error
	for _, vm := range c.VolumeMounts {
		src, ok := sources[vm.Name]
		if !ok || out[vm.Name] != nil {
			continue
		}
		ref, err := m.imageManager.EnsureImage(ctx, pod, src.Reference, images.VolumePullPolicy(src), sandboxCfg)
		if err != nil {
			m.Recorder.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %s", pullReason(err))
			last = err
			continue
		}
		out[vm.Name] = &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: src.Reference}
	}
	if last != nil {
		return nil, last
	}
	return out, nil
}

// pullReason is the reason a failed pull carries, which is all the kubelet's event says of it.
func pullReason(err error) string {
	if r := kubecontainer.ReasonFor(err); r != "" {
		return r
	}
	return err.Error()
}

// imageVolumeSubPath checks a volumeMount's subPath into an image volume as the kubelet does: a
// relative path that never climbs. The runtime resolves it inside the image without following a
// symlink out of it, and refuses one that is not there.
func imageVolumeSubPath(sub string) error {
	if filepath.IsAbs(sub) {
		return fmt.Errorf("error SubPath `%s` must not be an absolute path", sub)
	}
	for _, part := range strings.Split(filepath.ToSlash(sub), "/") {
		if part == ".." {
			return fmt.Errorf("unable to provision SubPath `%s`: %w", sub, errors.New("must not contain '..'"))
		}
	}
	return nil
}
