package devicemanager

import (
	"log/slog"
	"maps"
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodelet/nodelet/agent/cm/devicemanager/checkpoint"
)

// noTopology is the NUMA node of devices their plugin gave no topology, as the kubelet files them.
const noTopology = -1

// allocation is one container's devices of one resource and what the plugin answered for them.
type allocation struct {
	ids  checkpoint.DevicesPerNUMA
	resp *pluginapi.ContainerAllocateResponse
}

func (a allocation) devices() sets.Set[string] {
	s := sets.New[string]()
	for _, ids := range a.ids {
		s.Insert(ids...)
	}
	return s
}

// podDevices are the allocations: pod UID → container → resource.
type podDevices map[string]map[string]map[string]allocation

func (p podDevices) insert(pod, container, resource string, a allocation) {
	if p[pod] == nil {
		p[pod] = map[string]map[string]allocation{}
	}
	if p[pod][container] == nil {
		p[pod][container] = map[string]allocation{}
	}
	p[pod][container][resource] = a
}

// containerDevices is nil when the container holds none of resource.
func (p podDevices) containerDevices(pod, container, resource string) sets.Set[string] {
	a, ok := p[pod][container][resource]
	if !ok {
		return nil
	}
	return a.devices()
}

// inUse are the devices held, by resource.
func (p podDevices) inUse() map[string]sets.Set[string] {
	out := map[string]sets.Set[string]{}
	for _, containers := range p {
		for _, resources := range containers {
			for resource, a := range resources {
				if out[resource] == nil {
					out[resource] = sets.New[string]()
				}
				out[resource] = out[resource].Union(a.devices())
			}
		}
	}
	return out
}

func (p podDevices) clonePod(pod string) map[string]map[string]allocation {
	if p[pod] == nil {
		return nil
	}
	out := map[string]map[string]allocation{}
	for c, resources := range p[pod] {
		out[c] = maps.Clone(resources)
	}
	return out
}

// entries are the checkpoint's, in a fixed order so equal states write equal files.
func (p podDevices) entries(log *slog.Logger) []checkpoint.PodDevicesEntry {
	var out []checkpoint.PodDevicesEntry
	for pod, containers := range p {
		for container, resources := range containers {
			for resource, a := range resources {
				if a.resp == nil {
					continue
				}
				b, err := proto.Marshal(a.resp)
				if err != nil {
					log.Error("device allocation left out of the checkpoint", "podUID", pod, "container", container, "resource", resource, "err", err)
					continue
				}
				out = append(out, checkpoint.PodDevicesEntry{PodUID: pod, ContainerName: container, ResourceName: resource, DeviceIDs: a.ids, AllocResp: b})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.PodUID != b.PodUID {
			return a.PodUID < b.PodUID
		}
		if a.ContainerName != b.ContainerName {
			return a.ContainerName < b.ContainerName
		}
		return a.ResourceName < b.ResourceName
	})
	return out
}

// fromEntries reads a checkpoint's allocations; an entry whose response does not decode is
// skipped, so that container is allocated again when it next starts.
func fromEntries(entries []checkpoint.PodDevicesEntry, log *slog.Logger) podDevices {
	p := podDevices{}
	for _, e := range entries {
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.AllocResp, resp); err != nil {
			log.Error("checkpointed device allocation unreadable", "podUID", e.PodUID, "container", e.ContainerName, "resource", e.ResourceName, "err", err)
			continue
		}
		p.insert(e.PodUID, e.ContainerName, e.ResourceName, allocation{ids: e.DeviceIDs, resp: resp})
	}
	return p
}

// merged is one container's Allocate responses made one: the first resource (by name) to set an
// environment variable, a container path of a mount or device, or an annotation wins, as the
// kubelet keeps the first it meets (in map order there; by name here, so every start is alike).
// CDI device names are kept once each.
func merged(resources map[string]allocation, log *slog.Logger) *pluginapi.ContainerAllocateResponse {
	out := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{}, Annotations: map[string]string{}}
	mounts, devices, cdi := map[string]string{}, map[string]string{}, sets.New[string]()
	for _, resource := range slices.Sorted(maps.Keys(resources)) {
		r := resources[resource].resp
		if r == nil {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(r.Envs)) {
			if v, ok := out.Envs[k]; ok {
				if v != r.Envs[k] {
					log.Error("device plugins set an environment variable differently; the first is kept", "env", k, "resource", resource)
				}
				continue
			}
			out.Envs[k] = r.Envs[k]
		}
		for _, m := range r.Mounts {
			if h, ok := mounts[m.ContainerPath]; ok {
				if h != m.HostPath {
					log.Error("device plugins mount different host paths at one container path; the first is kept", "containerPath", m.ContainerPath, "resource", resource)
				}
				continue
			}
			mounts[m.ContainerPath] = m.HostPath
			out.Mounts = append(out.Mounts, m)
		}
		for _, d := range r.Devices {
			if h, ok := devices[d.ContainerPath]; ok {
				if h != d.HostPath {
					log.Error("device plugins map different host devices at one container path; the first is kept", "containerPath", d.ContainerPath, "resource", resource)
				}
				continue
			}
			devices[d.ContainerPath] = d.HostPath
			out.Devices = append(out.Devices, d)
		}
		for _, k := range slices.Sorted(maps.Keys(r.Annotations)) {
			if _, ok := out.Annotations[k]; !ok {
				out.Annotations[k] = r.Annotations[k]
			}
		}
		for _, d := range r.CdiDevices {
			if !cdi.Has(d.Name) {
				cdi.Insert(d.Name)
				out.CdiDevices = append(out.CdiDevices, d)
			}
		}
	}
	return out
}
