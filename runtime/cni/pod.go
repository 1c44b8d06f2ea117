package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/internal/fileid"
)

// rollbackTimeout bounds the DEL that undoes a failed ADD; it runs even when the caller's context
// is what made the ADD fail.
const rollbackTimeout = 30 * time.Second

func checkPod(pod PodNetwork) error {
	if !fileid.Valid(pod.SandboxID) {
		return fmt.Errorf("sandbox ID %q: %w", pod.SandboxID, errdefs.ErrInvalidArgument)
	}
	return nil
}

// SetUpPod attaches the pod's network namespace to the network (CNI ADD) and returns its IPs,
// IPv4 first. A failed ADD is rolled back with a DEL before the error is returned. Calling it again
// for a sandbox that already has a network returns the recorded IPs without a second ADD.
func (m *Manager) SetUpPod(ctx context.Context, pod PodNetwork) (*Result, error) {
	if err := checkPod(pod); err != nil {
		return nil, err
	}
	if pod.NetNSPath == "" {
		return nil, fmt.Errorf("sandbox %q has no network namespace path: %w", pod.SandboxID, errdefs.ErrInvalidArgument)
	}
	caps, err := capabilityArgs(pod)
	if err != nil {
		return nil, err
	}
	list, err := m.network(ctx)
	if err != nil {
		return nil, fmt.Errorf("pod network for sandbox %q: %w", pod.SandboxID, err)
	}
	rt := runtimeConfFor(pod, m.opts.IfName, caps)

	unlock := m.lockPod(pod.SandboxID)
	defer unlock()

	if err := InNetNS(pod.NetNSPath, loopbackUp); err != nil {
		return nil, fmt.Errorf("loopback of sandbox %q: %w", pod.SandboxID, err)
	}
	if prev, err := m.cni.GetNetworkListCachedResult(list, rt); err == nil && prev != nil {
		return toResult(prev)
	}
	if err := m.mark(list, rt); err != nil {
		return nil, fmt.Errorf("record pending CNI ADD of sandbox %q: %w", pod.SandboxID, err)
	}
	res, err := m.cni.AddNetworkList(ctx, list, rt)
	if err != nil {
		addErr := fmt.Errorf("CNI ADD of sandbox %q to network %q: %w", pod.SandboxID, list.Name, err)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		if delErr := m.cni.DelNetworkList(dctx, list, rt); delErr != nil {
			// The mark stays, so TearDownPod retries this DEL later.
			return nil, errors.Join(addErr, fmt.Errorf("rollback DEL: %w", delErr))
		}
		m.unmark(pod.SandboxID)
		return nil, addErr
	}
	m.unmark(pod.SandboxID)
	out, err := toResult(res)
	if err != nil {
		return nil, fmt.Errorf("CNI ADD of sandbox %q: %w", pod.SandboxID, err)
	}
	m.log.Debug("pod network up", "sandbox", pod.SandboxID, "ips", out.IPs)
	return out, nil
}

// TearDownPod detaches the pod from the network (CNI DEL) and releases its IP. It is idempotent and
// works after a daemon restart, after a half-failed ADD, and when the network namespace is already
// gone (the plugins then get a stand-in namespace, see del).
func (m *Manager) TearDownPod(ctx context.Context, pod PodNetwork) error {
	if err := checkPod(pod); err != nil {
		return err
	}
	unlock := m.lockPod(pod.SandboxID)
	defer unlock()

	jobs, err := m.delJobs(ctx, pod)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if err := m.del(ctx, j); err != nil {
			return fmt.Errorf("CNI DEL of sandbox %q from network %q: %w", pod.SandboxID, j.list.Name, err)
		}
	}
	m.unmark(pod.SandboxID)
	return nil
}

func runtimeConfFor(pod PodNetwork, ifName string, caps map[string]any) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID:    pod.SandboxID,
		NetNS:          pod.NetNSPath,
		IfName:         ifName,
		Args:           podArgs(pod),
		CapabilityArgs: caps,
	}
}

// del runs one DEL. When the pod's namespace is gone, the plugins get a stand-in namespace with the
// pod's old addresses (see withStandInNetNS), or no namespace at all if that cannot be made: the
// IP is released either way.
func (m *Manager) del(ctx context.Context, j delJob) error {
	if j.rt.NetNS == "" || IsNetNS(j.rt.NetNS) {
		return m.cni.DelNetworkList(ctx, j.list, j.rt)
	}
	gone := j.rt.NetNS
	j.rt.NetNS = ""
	var addrs []string
	if prev, err := m.cni.GetNetworkListCachedResult(j.list, j.rt); err == nil && prev != nil {
		if res, err := types100.NewResultFromResult(prev); err == nil {
			for _, ip := range podIPs(res) {
				addrs = append(addrs, ip.Address.String())
			}
		}
	}
	if len(addrs) > 0 {
		err := withStandInNetNS(j.rt.IfName, addrs, func(path string) error {
			rt := *j.rt
			rt.NetNS = path
			return m.cni.DelNetworkList(ctx, j.list, &rt)
		})
		if err == nil {
			return nil
		}
		m.log.Warn("DEL through a stand-in netns failed; retrying without a netns",
			"sandbox", j.rt.ContainerID, "netns", gone, "err", err)
	}
	return m.cni.DelNetworkList(ctx, j.list, j.rt)
}

type delJob struct {
	list *libcni.NetworkConfigList
	rt   *libcni.RuntimeConf
}

// delJobs finds what the sandbox was attached with: libcni's cache for a completed ADD, the
// pending mark for an interrupted one, else the current config with the pod's own arguments.
func (m *Manager) delJobs(ctx context.Context, pod PodNetwork) ([]delJob, error) {
	base := libcni.RuntimeConf{ContainerID: pod.SandboxID, NetNS: pod.NetNSPath, IfName: m.opts.IfName}
	fromCache := func(conf []byte, rt *libcni.RuntimeConf) (delJob, error) {
		list, err := libcni.NetworkConfFromBytes(conf)
		if err != nil {
			return delJob{}, fmt.Errorf("cached CNI config of sandbox %q: %w", pod.SandboxID, err)
		}
		if pod.NetNSPath != "" {
			rt.NetNS = pod.NetNSPath
		}
		return delJob{list: list, rt: rt}, nil
	}
	// Fast path: the current network, one file lookup.
	if list, _ := m.network(ctx); list != nil {
		conf, rt, err := m.cni.GetNetworkListCachedConfig(list, &base)
		if err == nil && conf != nil {
			j, err := fromCache(conf, rt)
			if err != nil {
				return nil, err
			}
			return []delJob{j}, nil
		}
	}
	// The config changed since the ADD: scan the cache for this sandbox.
	atts, err := m.cni.GetCachedAttachments(pod.SandboxID)
	if err != nil {
		return nil, fmt.Errorf("read CNI cache: %w", err)
	}
	var jobs []delJob
	for _, a := range atts {
		j, err := fromCache(a.Config, &libcni.RuntimeConf{
			ContainerID: a.ContainerID, NetNS: a.NetNS, IfName: a.IfName,
			Args: a.CniArgs, CapabilityArgs: a.CapabilityArgs,
		})
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	if len(jobs) > 0 {
		return jobs, nil
	}
	p, err := m.readMark(pod.SandboxID)
	if err != nil {
		return nil, err
	}
	if p == nil {
		// Nothing recorded: either the pod never had a network, or the state dir was lost (a
		// reboot with it on tmpfs) while plugins kept theirs (host-local's store is on disk).
		// A DEL with the current config and the pod's own args frees what it can find; plugins
		// release by container ID, so this never frees another pod's IP.
		list, err := m.network(ctx)
		if list == nil {
			m.log.Debug("no CNI record and no usable config; nothing to tear down", "sandbox", pod.SandboxID, "reason", err)
			return nil, nil
		}
		caps, err := capabilityArgs(pod)
		if err != nil {
			caps = nil // bad annotations must not block a teardown; port mappings are what DEL needs
			if pm := portMappings(pod.PortMappings); len(pm) > 0 {
				caps = map[string]any{"portMappings": pm}
			}
		}
		return []delJob{{list: list, rt: runtimeConfFor(pod, m.opts.IfName, caps)}}, nil
	}
	j, err := fromCache(p.Config, &libcni.RuntimeConf{
		ContainerID: pod.SandboxID, NetNS: p.NetNS, IfName: p.IfName,
		Args: p.Args, CapabilityArgs: p.CapabilityArgs,
	})
	if err != nil {
		return nil, err
	}
	return []delJob{j}, nil
}

// pending is the mark written before an ADD and removed once the ADD is cached or rolled back.
type pending struct {
	Config         json.RawMessage `json:"config"`
	NetNS          string          `json:"netns"`
	IfName         string          `json:"ifName"`
	Args           [][2]string     `json:"args,omitempty"`
	CapabilityArgs map[string]any  `json:"capabilityArgs,omitempty"`
}

func (m *Manager) markPath(id string) string {
	return filepath.Join(m.opts.StateDir, "pending", id+".json")
}

func (m *Manager) mark(list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) error {
	b, err := json.Marshal(pending{
		Config: list.Bytes, NetNS: rt.NetNS, IfName: rt.IfName, Args: rt.Args, CapabilityArgs: rt.CapabilityArgs,
	})
	if err != nil {
		return err
	}
	p := m.markPath(rt.ContainerID)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	// No fsync: the mark guards against a daemon crash, which keeps the page cache; a machine
	// crash takes the veths and iptables rules with it, and libcni's own cache is not synced either.
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

func (m *Manager) unmark(id string) {
	if err := os.Remove(m.markPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.Warn("remove pending CNI mark", "sandbox", id, "err", err)
	}
}

func (m *Manager) readMark(id string) (*pending, error) {
	b, err := os.ReadFile(m.markPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p pending
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("pending CNI mark of sandbox %q: %w", id, err)
	}
	return &p, nil
}

// toResult lists the IPs of the pod-side interfaces, IPv4 first (CRI takes the first as the pod IP).
func toResult(r types.Result) (*Result, error) {
	res, err := types100.NewResultFromResult(r)
	if err != nil {
		return nil, err
	}
	var v4, v6 []string
	for _, ip := range podIPs(res) {
		if ip.Address.IP.To4() != nil {
			v4 = append(v4, ip.Address.IP.String())
		} else if ip.Address.IP.To16() != nil {
			v6 = append(v6, ip.Address.IP.String())
		}
	}
	if len(v4)+len(v6) == 0 {
		return nil, errors.New("the network gave the pod no IP address")
	}
	return &Result{IPs: append(v4, v6...)}, nil
}

// podIPs are the result's addresses on interfaces inside the pod (not the bridge's or the veth's).
func podIPs(res *types100.Result) []*types100.IPConfig {
	var out []*types100.IPConfig
	for _, ip := range res.IPs {
		if ip.Interface != nil {
			i := *ip.Interface
			if i < 0 || i >= len(res.Interfaces) || res.Interfaces[i].Sandbox == "" {
				continue
			}
		}
		out = append(out, ip)
	}
	return out
}
