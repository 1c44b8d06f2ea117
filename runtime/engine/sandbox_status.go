package engine

import (
	"encoding/json"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/store"
)

// SandboxStatus reports a sandbox as CRI shows it; with verbose, also its info (what crictl
// inspectp shows under "info"), else nil.
func (s *Engine) SandboxStatus(id string, verbose bool) (*runtimeapi.PodSandboxStatus, map[string]string, error) {
	sb, err := s.sandboxes.Get(id)
	if err != nil {
		return nil, nil, err
	}
	var info map[string]string
	if verbose {
		info = map[string]string{"info": sandboxInfo(sb)}
	}
	return sandboxStatus(sb), info, nil
}

func sandboxStatus(sb *store.Sandbox) *runtimeapi.PodSandboxStatus {
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
	return st
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
