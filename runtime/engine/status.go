package engine

import (
	"context"
	"encoding/json"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func (s *Engine) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	runtimeReady := &runtimeapi.RuntimeCondition{Type: runtimeapi.RuntimeReady, Status: true}
	networkReady := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true}
	if s.cfg.Network != nil {
		if err := s.cfg.Network.Status(); err != nil {
			networkReady.Status = false
			networkReady.Reason = "NetworkPluginNotReady"
			networkReady.Message = err.Error()
		}
	}
	resp := &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{runtimeReady, networkReady}},
		// ContainerStatus reports the user and the Strict policy is honoured by the OCI spec.
		Features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true},
	}
	userns := s.usernsRootfsReachable()
	features := func(h Handler) *runtimeapi.RuntimeHandlerFeatures {
		return &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: rroCapable(h), UserNamespaces: userns && usernsCapable(h)}
	}
	// The default handler is listed under "" too, as containerd does: a client that names no
	// handler (critest without --runtime-handler, a pod without runtimeClassName) finds its
	// features there.
	if h, ok := s.cfg.Handlers[s.cfg.DefaultHandler]; ok {
		resp.RuntimeHandlers = append(resp.RuntimeHandlers, &runtimeapi.RuntimeHandler{Name: "", Features: features(h)})
	}
	for name, h := range s.cfg.Handlers {
		resp.RuntimeHandlers = append(resp.RuntimeHandlers, &runtimeapi.RuntimeHandler{Name: name, Features: features(h)})
	}
	if req.GetVerbose() {
		info, _ := json.Marshal(map[string]any{
			"root": s.cfg.Root, "state": s.cfg.State, "defaultHandler": s.cfg.DefaultHandler,
			"handlers": s.cfg.Handlers, "cgroupParent": s.cfg.CgroupParent,
		})
		resp.Info = map[string]string{"config": string(info)}
	}
	return resp, nil
}

func (s *Engine) RuntimeConfig(ctx context.Context, req *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	// The daemon manages cgroups through cgroupfs; the kubelet must use the same driver.
	return &runtimeapi.RuntimeConfigResponse{
		Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS},
	}, nil
}

// UpdateRuntimeConfig takes the node's pod CIDR from the kubelet: the default network nodelet wrote
// hands out addresses from it from then on; a network of the admin's keeps its own ranges.
func (s *Engine) UpdateRuntimeConfig(ctx context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	cidr := req.GetRuntimeConfig().GetNetworkConfig().GetPodCidr()
	if cidr == "" {
		return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
	}
	if p, ok := s.cfg.Network.(PodCIDRSetter); ok {
		if _, err := p.SetPodCIDR(cidr); err != nil {
			return nil, err
		}
	}
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// usernsCapable reports whether pods of handler h may have their own user namespace: runc and crun
// join the pod's pinned user namespace (the rootfs is idmapped by the runtime itself, so neither
// needs idmapped-mount support of its own). runsc (gVisor) is left out: its sandbox does not use
// the host's namespaces for its guest.
func usernsCapable(h Handler) bool {
	switch filepath.Base(h.Path) {
	case "runc", "crun":
		return true
	}
	return false
}

// rroCapable reports whether handler h takes recursive read-only mounts (the "rro" mount option):
// runc and crun do; runsc of 2022 refuses the option.
func rroCapable(h Handler) bool {
	return filepath.Base(h.Path) != "runsc"
}
