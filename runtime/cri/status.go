package cri

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func (s *RuntimeService) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	runtimeReady := &runtimeapi.RuntimeCondition{Type: runtimeapi.RuntimeReady, Status: true}
	networkReady := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true}
	if err := s.eng.NetworkStatus(); err != nil {
		networkReady.Status = false
		networkReady.Reason = "NetworkPluginNotReady"
		networkReady.Message = err.Error()
	}
	resp := &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{runtimeReady, networkReady}},
		// ContainerStatus reports the user and the Strict policy is honoured by the OCI spec.
		Features:        &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true},
		RuntimeHandlers: s.eng.RuntimeHandlers(),
	}
	if req.GetVerbose() {
		resp.Info = map[string]string{"config": s.eng.ConfigInfo()}
	}
	return resp, nil
}

func (s *RuntimeService) RuntimeConfig(ctx context.Context, req *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	// The engine manages cgroups through cgroupfs; the kubelet must use the same driver.
	return &runtimeapi.RuntimeConfigResponse{
		Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS},
	}, nil
}

// UpdateRuntimeConfig takes the node's pod CIDR from the kubelet, for the pod network.
func (s *RuntimeService) UpdateRuntimeConfig(ctx context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	if cidr := req.GetRuntimeConfig().GetNetworkConfig().GetPodCidr(); cidr != "" {
		if err := s.eng.SetPodCIDR(cidr); err != nil {
			return nil, err
		}
	}
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}
