package cadvisor

import (
	"context"
	"os"
	"path"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/cm"
	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// labels are cAdvisor's for one cgroup: the Kubernetes names for a container's, empty for a raw
// cgroup (the pods' root, a QoS tier, a pod's own cgroup), as cAdvisor gives them the kubelet.
type labels struct {
	container, id, image, name, namespace, pod string
}

func (l labels) values() []string {
	return []string{l.container, l.id, l.image, l.name, l.namespace, l.pod}
}

// cgroup is one cgroup to report, and, for a pod's, its pod's sandbox ID.
type cgroup struct {
	labels
	sandbox string // a pod's cgroup: the sandbox whose network it reports
	created int64  // a container's or sandbox's creation (ns), as the runtime says; 0: unnamed
}

// known are the runtime's containers and sandboxes by ID.
type known struct {
	containers map[string]*runtimeapi.Container
	sandboxes  map[string]*runtimeapi.PodSandbox
	byPodUID   map[string]*runtimeapi.PodSandbox
}

func (c *Collector) known(ctx context.Context) (known, error) {
	k := known{containers: map[string]*runtimeapi.Container{}, sandboxes: map[string]*runtimeapi.PodSandbox{}, byPodUID: map[string]*runtimeapi.PodSandbox{}}
	cs, err := c.cfg.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return k, err
	}
	for _, ct := range cs.GetContainers() {
		k.containers[ct.GetId()] = ct
	}
	sbs, err := c.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return k, err
	}
	for _, sb := range sbs.GetItems() {
		k.sandboxes[sb.GetId()] = sb
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			k.byPodUID[sb.GetMetadata().GetUid()] = sb
		}
	}
	return k, nil
}

// cgroups walks the pods' cgroups, as cAdvisor finds them: the pods' root, its QoS tiers, each
// pod's cgroup and the cgroups below it, named after the containers and sandboxes the runtime
// holds (a folder whose name holds a container's ID is that container's: runc's and crun's
// cgroupfs names, and systemd's cri-containerd-<id>.scope alike).
func (c *Collector) cgroups(k known) []cgroup {
	if c.cfg.PodsCgroup == "" {
		return nil // the runtime places pods where the agent does not know
	}
	names := cm.PodCgroups{Root: c.cfg.PodsCgroup}
	out := []cgroup{{labels: labels{id: c.cfg.PodsCgroup}}}
	for _, tier := range cm.QoSTiers {
		tierPath := names.Tier(tier)
		if tier != "" {
			if !c.cfg.FS.Exists(tierPath) {
				continue
			}
			out = append(out, cgroup{labels: labels{id: tierPath}})
		}
		for _, e := range c.subdirs(tierPath) {
			uid, ok := cm.PodUID(e)
			if !ok {
				continue
			}
			podPath := path.Join(tierPath, e)
			pod := cgroup{labels: labels{id: podPath}}
			if sb := k.byPodUID[uid]; sb != nil {
				pod.sandbox = sb.GetId()
			}
			out = append(out, pod)
			for _, child := range c.subdirs(podPath) {
				out = append(out, childCgroup(k, path.Join(podPath, child), child))
			}
		}
	}
	return out
}

// childCgroup names a cgroup below a pod's: a container's, the sandbox's, or one the runtime
// does not name (then only its path).
func childCgroup(k known, id, dir string) cgroup {
	sandboxCgroup := func(sid string, sb *runtimeapi.PodSandbox) cgroup {
		return cgroup{labels: labels{id: id, name: sid, namespace: sb.GetMetadata().GetNamespace(), pod: sb.GetMetadata().GetName()},
			created: sb.GetCreatedAt()}
	}
	if ct, ok := k.containers[dir]; ok {
		return cgroup{labels: containerLabels(ct, id, dir), created: ct.GetCreatedAt()}
	}
	if sb, ok := k.sandboxes[dir]; ok {
		return sandboxCgroup(dir, sb)
	}
	for cid, ct := range k.containers {
		if strings.Contains(dir, cid) {
			return cgroup{labels: containerLabels(ct, id, cid), created: ct.GetCreatedAt()}
		}
	}
	for sid, sb := range k.sandboxes {
		if strings.Contains(dir, sid) {
			return sandboxCgroup(sid, sb)
		}
	}
	return cgroup{labels: labels{id: id}}
}

func containerLabels(ct *runtimeapi.Container, id, cid string) labels {
	img := ct.GetImage().GetUserSpecifiedImage()
	if img == "" {
		img = ct.GetImage().GetImage()
	}
	return labels{container: ct.GetMetadata().GetName(), id: id, image: img, name: cid,
		namespace: ct.GetLabels()[kubecontainer.LabelPodNamespace], pod: ct.GetLabels()[kubecontainer.LabelPodName]}
}

// subdirs lists the cgroup folders below p, in the memory hierarchy (every v2 controller's).
func (c *Collector) subdirs(p string) []string {
	ents, err := os.ReadDir(c.cfg.FS.Dir("memory", p))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}
