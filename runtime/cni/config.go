package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/runtime/errdefs"
)

// DefaultNetwork describes the bridge network nodelet writes into an empty conf dir so that a
// fresh machine has pod networking without any setup.
//
// The default is bridge "nodelet0" with host-local addresses from 10.88.0.0/16 (the subnet
// containerd's and podman's sample bridge configs use, so it is familiar and documented in the
// same places), the bridge as the pods' gateway, masquerade for traffic leaving the subnet, hairpin
// so a pod reaches itself through its own hostPort, then portmap (hostPort, with SNAT so the host's
// own 127.0.0.1 works) and bandwidth (the kubernetes.io/{ingress,egress}-bandwidth annotations).
// Loopback is not in the list: the manager brings lo up itself.
type DefaultNetwork struct {
	Name    string // network name; default "nodelet"
	Bridge  string // bridge device; default "nodelet0"
	Subnet  string // IPv4 CIDR for host-local; default "10.88.0.0/16"
	Subnet6 string // optional IPv6 CIDR; pods then get both families
	DataDir string // host-local's allocation store; "" keeps the plugin's default /var/lib/cni/networks
}

const (
	defaultNetName  = "nodelet"
	defaultBridge   = "nodelet0"
	defaultSubnet   = "10.88.0.0/16"
	defaultConfName = "10-nodelet-bridge.conflist"
)

func (d DefaultNetwork) withDefaults() DefaultNetwork {
	if d.Name == "" {
		d.Name = defaultNetName
	}
	if d.Bridge == "" {
		d.Bridge = defaultBridge
	}
	if d.Subnet == "" {
		d.Subnet = defaultSubnet
	}
	return d
}

// ConfList renders the network as a CNI 1.0.0 configuration list.
func (d DefaultNetwork) ConfList() []byte {
	d = d.withDefaults()
	ranges := [][]map[string]string{{{"subnet": d.Subnet}}}
	routes := []map[string]string{{"dst": "0.0.0.0/0"}}
	if d.Subnet6 != "" {
		ranges = append(ranges, []map[string]string{{"subnet": d.Subnet6}})
		routes = append(routes, map[string]string{"dst": "::/0"})
	}
	ipam := map[string]any{"type": "host-local", "ranges": ranges, "routes": routes}
	if d.DataDir != "" {
		ipam["dataDir"] = d.DataDir
	}
	list := map[string]any{
		"cniVersion": "1.0.0",
		"name":       d.Name,
		"plugins": []map[string]any{
			{
				"type":        "bridge",
				"bridge":      d.Bridge,
				"isGateway":   true,
				"ipMasq":      true,
				"hairpinMode": true,
				"ipam":        ipam,
			},
			{"type": "portmap", "snat": true, "capabilities": map[string]bool{"portMappings": true}},
			{"type": "bandwidth", "capabilities": map[string]bool{"bandwidth": true}},
		},
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		panic(err) // only maps of strings, bools and slices: cannot fail
	}
	return append(b, '\n')
}

// confExtensions are the file kinds read from the conf dir. .conf and .json hold a single plugin
// and are wrapped into a list, as the kubelet and containerd do, so existing dirs keep working.
var confExtensions = []string{".conflist", ".conf", ".json"}

// loadResult is one scan of the conf dir.
type loadResult struct {
	list *libcni.NetworkConfigList
	file string
	err  error // why no list is usable; nil when list is set
}

// load picks the first valid configuration in dir, by file name. A file is valid when it parses and
// every plugin it names exists in the bin dirs and speaks its cniVersion.
func load(ctx context.Context, c *libcni.CNIConfig, dir string) loadResult {
	files, err := libcni.ConfFiles(dir, confExtensions)
	if err != nil {
		return loadResult{err: fmt.Errorf("read CNI conf dir %s: %w", dir, err)}
	}
	slices.Sort(files)
	if len(files) == 0 {
		return loadResult{err: notReady(fmt.Sprintf("no CNI network config in %s", dir))}
	}
	var reasons []string
	for _, f := range files {
		list, err := parseFile(f)
		if err == nil {
			_, err = c.ValidateNetworkList(ctx, list)
		}
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: %v", filepath.Base(f), err))
			continue
		}
		return loadResult{list: list, file: f}
	}
	return loadResult{err: notReady(fmt.Sprintf("no valid CNI network config in %s (%s)",
		dir, strings.Join(reasons, "; ")))}
}

// notReadyError is why the network is not ready. Its text is only the reason, as it becomes the
// message of the NetworkReady=false condition; it still is an errdefs.ErrFailedPrecondition.
type notReadyError struct{ reason string }

func notReady(reason string) error     { return &notReadyError{reason} }
func (e *notReadyError) Error() string { return e.reason }
func (e *notReadyError) Unwrap() error { return errdefs.ErrFailedPrecondition }

func parseFile(f string) (*libcni.NetworkConfigList, error) {
	if strings.HasSuffix(f, ".conflist") {
		return libcni.NetworkConfFromFile(f)
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return nil, err
	}
	conf, err := libcni.NetworkPluginConfFromBytes(b)
	if err != nil {
		return nil, err
	}
	if conf.Network.Type == "" {
		return nil, errors.New("no plugin type")
	}
	return libcni.ConfListFromConf(conf)
}

// writeDefault puts the default network into dir unless dir already holds any config file: a
// broken file of the admin's is reported, not silently replaced by ours.
func writeDefault(dir string, d DefaultNetwork) (bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	files, err := libcni.ConfFiles(dir, confExtensions)
	if err != nil || len(files) > 0 {
		return false, err
	}
	return true, atomicfile.Write(filepath.Join(dir, defaultConfName), d.ConfList(), 0o644)
}
