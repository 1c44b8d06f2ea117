package cni

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/runtime/errdefs"
)

// SetPodCIDR gives the default network the node's pod CIDRs ("10.244.1.0/24" or a dual-stack
// "10.244.1.0/24,fd00:1::/64"), which the kubelet sends through UpdateRuntimeConfig once the
// cluster allocated them, so that two nodes do not hand out the same pod IPs. Only the file
// nodelet wrote itself is rewritten, and only while it is unchanged from what nodelet wrote: an
// admin's network keeps its own ranges, as with containerd's CNI config template. Pods already
// running keep their addresses. It reports whether the file changed.
func (m *Manager) SetPodCIDR(cidrs string) (bool, error) {
	var v4, v6 string
	for _, c := range strings.Split(cidrs, ",") {
		c = strings.TrimSpace(c)
		ip, n, err := net.ParseCIDR(c)
		if err != nil {
			return false, fmt.Errorf("%w: pod CIDR %q: %v", errdefs.ErrInvalidArgument, c, err)
		}
		if ip.To4() != nil && v4 == "" {
			v4 = n.String()
		} else if ip.To4() == nil && v6 == "" {
			v6 = n.String()
		} else {
			return false, fmt.Errorf("%w: pod CIDRs %q: at most one of each family", errdefs.ErrInvalidArgument, cidrs)
		}
	}
	if m.opts.NoDefault {
		return false, nil
	}
	path := filepath.Join(m.opts.ConfDir, defaultConfName)
	cur, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return false, nil // the admin's network, or none yet
	}
	if err != nil {
		return false, err
	}
	written, ok := m.ownDefault(cur)
	if !ok {
		m.log.Info("the default network file was changed by hand; the pod CIDR is not applied to it", "file", path, "podCIDR", cidrs)
		return false, nil
	}
	want := written
	if v4 != "" {
		want.Subnet = v4
	}
	if v6 != "" {
		want.Subnet6 = v6
	}
	if want == written {
		return false, nil
	}
	if err := atomicfile.Write(filepath.Join(m.opts.ConfDir, defaultConfName), want.ConfList(), 0o644); err != nil {
		return false, err
	}
	m.log.Info("default network now hands out the node's pod CIDR", "file", path, "subnet", want.Subnet, "subnet6", want.Subnet6)
	return true, nil
}

// ownDefault reports the DefaultNetwork that rendered b, when b is exactly what this runtime's
// default network renders with the subnets b holds.
func (m *Manager) ownDefault(b []byte) (DefaultNetwork, bool) {
	var doc struct {
		Plugins []struct {
			IPAM struct {
				Ranges [][]struct{ Subnet string } `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Plugins) == 0 {
		return DefaultNetwork{}, false
	}
	d := m.opts.Default.withDefaults()
	d.Subnet, d.Subnet6 = "", ""
	for i, r := range doc.Plugins[0].IPAM.Ranges {
		if len(r) != 1 {
			return DefaultNetwork{}, false
		}
		switch i {
		case 0:
			d.Subnet = r[0].Subnet
		case 1:
			d.Subnet6 = r[0].Subnet
		default:
			return DefaultNetwork{}, false
		}
	}
	return d, d.Subnet != "" && bytes.Equal(d.ConfList(), b)
}
