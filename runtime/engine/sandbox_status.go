package engine

import (
	"context"
	"encoding/json"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/store"
)

func (s *Engine) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	sb, err := s.sandboxes.Get(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	st := &runtimeapi.PodSandboxStatus{
		Id:             sb.ID,
		Metadata:       sb.Config.GetMetadata(),
		State:          sb.State,
		CreatedAt:      sb.CreatedAt,
		Labels:         sb.Config.GetLabels(),
		Annotations:    sb.Config.GetAnnotations(),
		RuntimeHandler: sb.Handler,
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: namespaceOptions(sb.Config),
		}},
	}
	if len(sb.IPs) > 0 {
		st.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: sb.IPs[0]}
		for _, ip := range sb.IPs[1:] {
			st.Network.AdditionalIps = append(st.Network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
		}
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: st, Timestamp: time.Now().UnixNano()}
	if req.GetVerbose() {
		resp.Info = map[string]string{"info": sandboxInfo(sb)}
	}
	return resp, nil
}

// namespaceOptions reports the options the pod asked for, with the zero value (all POD) when it
// gave none, as containerd does.
func namespaceOptions(cfg *runtimeapi.PodSandboxConfig) *runtimeapi.NamespaceOption {
	o := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if o == nil {
		return &runtimeapi.NamespaceOption{}
	}
	return &runtimeapi.NamespaceOption{Network: o.Network, Pid: o.Pid, Ipc: o.Ipc, TargetId: o.TargetId}
}

// sandboxInfo is the verbose status: what crictl inspectp shows under "info".
func sandboxInfo(sb *store.Sandbox) string {
	b, _ := json.Marshal(map[string]any{
		"pid":            sb.InfraPID,
		"runtimeHandler": sb.Handler,
		"netnsPath":      sb.NetNSPath,
		"ipcnsPath":      sb.IPCNSPath,
		"utsnsPath":      sb.UTSNSPath,
		"pidnsPath":      sb.PIDNSPath,
		"usernsPath":     sb.UserNSPath,
		"shmPath":        sb.ShmPath,
		"cgroupParent":   sb.CgroupParent,
		"sandboxDir":     sb.Dir,
		"networkReady":   sb.NetworkReady,
		"config":         sb.Config,
	})
	return string(b)
}
