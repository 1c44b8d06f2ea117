package server

import (
	"context"
	"encoding/json"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func (s *Server) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
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
	for name := range s.cfg.Handlers {
		resp.RuntimeHandlers = append(resp.RuntimeHandlers, &runtimeapi.RuntimeHandler{
			Name:     name,
			Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true},
		})
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

func (s *Server) RuntimeConfig(ctx context.Context, req *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	// The daemon manages cgroups through cgroupfs; the kubelet must use the same driver.
	return &runtimeapi.RuntimeConfigResponse{
		Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS},
	}, nil
}

// UpdateRuntimeConfig accepts the pod CIDR the kubelet sends; CNI configs carry their own ranges, so
// it only needs remembering for Status' verbose info.
func (s *Server) UpdateRuntimeConfig(ctx context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}
