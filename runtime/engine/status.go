package engine

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// NetworkStatus is nil when pods can be networked (or get loopback only), else the reason they
// cannot.
func (s *Engine) NetworkStatus() error {
	if s.cfg.Network == nil {
		return nil
	}
	return s.cfg.Network.Status()
}

// RuntimeHandlers lists the configured handlers with their features.
func (s *Engine) RuntimeHandlers() []*runtimeapi.RuntimeHandler {
	var out []*runtimeapi.RuntimeHandler
	userns := s.usernsRootfsReachable()
	features := func(h Handler) *runtimeapi.RuntimeHandlerFeatures {
		return &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: rroCapable(h), UserNamespaces: userns && usernsCapable(h)}
	}
	// The default handler is listed under "" too, as containerd does: a client that names no
	// handler (critest without --runtime-handler, a pod without runtimeClassName) finds its
	// features there.
	if h, ok := s.cfg.Handlers[s.cfg.DefaultHandler]; ok {
		out = append(out, &runtimeapi.RuntimeHandler{Name: "", Features: features(h)})
	}
	// By name: a map's order changes between calls, and the kubelet posts its Node's status
	// again whenever the list it copies from here changes.
	for _, name := range slices.Sorted(maps.Keys(s.cfg.Handlers)) {
		out = append(out, &runtimeapi.RuntimeHandler{Name: name, Features: features(s.cfg.Handlers[name])})
	}
	return out
}

// ConfigInfo is the engine's configuration as the verbose runtime status shows it.
func (s *Engine) ConfigInfo() string {
	info, _ := json.Marshal(map[string]any{
		"root": s.cfg.Root, "state": s.cfg.State, "defaultHandler": s.cfg.DefaultHandler,
		"handlers": s.cfg.Handlers, "cgroupParent": s.cfg.CgroupParent,
	})
	return string(info)
}

// SetPodCIDR takes the node's pod CIDR from the kubelet: the default network nodelet wrote hands
// out addresses from it from then on; a network of the admin's keeps its own ranges.
func (s *Engine) SetPodCIDR(cidr string) error {
	if p, ok := s.cfg.Network.(PodCIDRSetter); ok {
		if _, err := p.SetPodCIDR(cidr); err != nil {
			return err
		}
	}
	return nil
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
