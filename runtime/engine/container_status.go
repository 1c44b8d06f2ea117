package engine

import (
	"encoding/json"
	"fmt"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/oci"
	"github.com/nodelet/nodelet/runtime/store"
)

// ContainerStatus reports a container as CRI shows it; with verbose, also its info (what crictl
// inspect shows under "info"), else nil.
func (s *Engine) ContainerStatus(id string, verbose bool) (*runtimeapi.ContainerStatus, map[string]string, error) {
	c, err := s.containers.Get(id)
	if err != nil {
		return nil, nil, fmt.Errorf("container %q: %w", id, err)
	}
	status := containerStatus(c)
	var infoMap map[string]string
	if verbose {
		st := c.Snapshot()
		info := map[string]any{
			"sandboxID": c.SandboxID, "pid": st.Pid, "conmonPid": st.ConmonPid, "handler": c.Handler,
			"bundle": c.Bundle, "rootfs": c.Rootfs, "cgroupsPath": c.CgroupPath,
		}
		if spec, err := oci.ReadSpec(c.Bundle); err == nil {
			info["runtimeSpec"] = spec
		}
		data, _ := json.Marshal(info)
		infoMap = map[string]string{"info": string(data)}
	}
	return status, infoMap, nil
}

func containerStatus(c *store.Container) *runtimeapi.ContainerStatus {
	st := c.Snapshot()
	cfg := c.Config
	out := &runtimeapi.ContainerStatus{
		Id:          c.ID,
		Metadata:    cfg.GetMetadata(),
		State:       st.State,
		CreatedAt:   c.CreatedAt,
		StartedAt:   st.StartedAt,
		FinishedAt:  st.FinishedAt,
		ExitCode:    st.ExitCode,
		Image:       &runtimeapi.ImageSpec{Image: c.Image, Annotations: cfg.GetImage().GetAnnotations()},
		ImageRef:    c.ImageRef,
		ImageId:     c.ImageID,
		Reason:      st.Reason,
		Message:     st.Message,
		Labels:      cfg.GetLabels(),
		Annotations: cfg.GetAnnotations(),
		Mounts:      cfg.GetMounts(),
		LogPath:     c.LogPath,
		User:        c.User,
	}
	if st.Resources != nil {
		out.Resources = &runtimeapi.ContainerResources{Linux: st.Resources}
	}
	return out
}

// ListContainers lists the containers f lets through (all with no filter).
func (s *Engine) ListContainers(f *runtimeapi.ContainerFilter) []*runtimeapi.Container {
	var out []*runtimeapi.Container
	for _, c := range s.containers.List() {
		st := c.Snapshot()
		if !containerMatches(c, st, f) {
			continue
		}
		out = append(out, &runtimeapi.Container{
			Id:           c.ID,
			PodSandboxId: c.SandboxID,
			Metadata:     c.Config.GetMetadata(),
			Image:        &runtimeapi.ImageSpec{Image: c.Image},
			ImageRef:     c.ImageRef,
			ImageId:      c.ImageID,
			State:        st.State,
			CreatedAt:    c.CreatedAt,
			Labels:       c.Config.GetLabels(),
			Annotations:  c.Config.GetAnnotations(),
		})
	}
	return out
}

// containerMatches applies a CRI filter; IDs match by prefix, as crictl's short IDs do.
func containerMatches(c *store.Container, st store.ContainerStatus, f *runtimeapi.ContainerFilter) bool {
	if f == nil {
		return true
	}
	if f.GetId() != "" && !strings.HasPrefix(c.ID, f.GetId()) {
		return false
	}
	if f.GetPodSandboxId() != "" && !strings.HasPrefix(c.SandboxID, f.GetPodSandboxId()) {
		return false
	}
	if f.GetState() != nil && f.GetState().GetState() != st.State {
		return false
	}
	labels := c.Config.GetLabels()
	for k, v := range f.GetLabelSelector() {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
