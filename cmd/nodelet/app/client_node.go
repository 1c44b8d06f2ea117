package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/agent/server/apiclient"
)

// isNodeKind tells kubectl's names of the node resource.
func isNodeKind(s string) bool {
	switch strings.ToLower(s) {
	case "node", "nodes", "no":
		return true
	}
	return false
}

// nodeName accepts "NAME" and kubectl's "node/NAME".
func nodeName(arg string) string {
	if kind, name, ok := strings.Cut(arg, "/"); ok && isNodeKind(kind) {
		return name
	}
	return arg
}

// fetchNode asks the agent for its Node; a name that is not the agent's is kubectl's NotFound.
func fetchNode(ctx context.Context, c *apiclient.Client, name string) (*v1.Node, error) {
	var n v1.Node
	if err := c.GetJSON(ctx, "/node", nil, &n); err != nil {
		if apiclient.IsNotFound(err) {
			return nil, fmt.Errorf("the agent has no Node yet (it builds it shortly after starting): %w", err)
		}
		return nil, err
	}
	if name != "" && name != n.Name {
		return nil, fmt.Errorf("nodes %q not found", name)
	}
	return &n, nil
}

// getNodes is `nodelet get nodes [NAME]`: the agent's own Node, in kubectl's columns.
func getNodes(cmd *cobra.Command, cf *clientFlags, names []string, output string, noHeaders bool) error {
	if len(names) > 1 {
		return fmt.Errorf("the agent has one node; %d names given", len(names))
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	name := ""
	if len(names) == 1 {
		name = nodeName(names[0])
	}
	n, err := fetchNode(cmd.Context(), c, name)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	switch output {
	case "json", "yaml":
		n.TypeMeta = metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}
		var obj any = n
		if name == "" {
			obj = map[string]any{"apiVersion": "v1", "kind": "List", "items": []any{n}, "metadata": map[string]any{"resourceVersion": ""}}
		}
		return printObject(out, obj, output)
	case "name":
		_, err := fmt.Fprintf(out, "node/%s\n", n.Name)
		return err
	}
	return printNodeTable(out, []v1.Node{*n}, output == "wide", noHeaders, clock())
}

func printObject(w io.Writer, obj any, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "    ")
		return enc.Encode(obj)
	}
	b, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func printNodeTable(w io.Writer, nodes []v1.Node, wide, noHeaders bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if !noHeaders {
		h := "NAME\tSTATUS\tROLES\tAGE\tVERSION"
		if wide {
			h += "\tINTERNAL-IP\tEXTERNAL-IP\tOS-IMAGE\tKERNEL-VERSION\tCONTAINER-RUNTIME"
		}
		fmt.Fprintln(tw, h)
	}
	for i := range nodes {
		n := &nodes[i]
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", n.Name, nodeStatus(n), strings.Join(nodeRoles(n), ","),
			age(n.CreationTimestamp, now), n.Status.NodeInfo.KubeletVersion)
		if wide {
			info := n.Status.NodeInfo
			row += fmt.Sprintf("\t%s\t%s\t%s\t%s\t%s", nodeAddress(n, v1.NodeInternalIP), nodeAddress(n, v1.NodeExternalIP),
				orNone(info.OSImage), orNone(info.KernelVersion), orNone(info.ContainerRuntimeVersion))
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// nodeStatus is kubectl's STATUS: Ready, NotReady or Unknown, then SchedulingDisabled.
func nodeStatus(n *v1.Node) string {
	var status []string
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			if c.Status == v1.ConditionTrue {
				status = append(status, "Ready")
			} else {
				status = append(status, "NotReady")
			}
		}
	}
	if len(status) == 0 {
		status = append(status, "Unknown")
	}
	if n.Spec.Unschedulable {
		status = append(status, "SchedulingDisabled")
	}
	return strings.Join(status, ",")
}

// nodeRoles are kubectl's: node-role.kubernetes.io/<role> labels and kubernetes.io/role.
func nodeRoles(n *v1.Node) []string {
	set := map[string]bool{}
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, "node-role.kubernetes.io/"):
			if role := strings.TrimPrefix(k, "node-role.kubernetes.io/"); role != "" {
				set[role] = true
			}
		case k == "kubernetes.io/role" && v != "":
			set[v] = true
		}
	}
	if len(set) == 0 {
		return []string{"<none>"}
	}
	roles := make([]string, 0, len(set))
	for r := range set {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	return roles
}

func nodeAddress(n *v1.Node, t v1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

// describeNodeCmd is `nodelet describe node [NAME]`.
func describeNodeCmd(cmd *cobra.Command, cf *clientFlags, names []string) error {
	c, err := cf.client()
	if err != nil {
		return err
	}
	name := ""
	if len(names) > 0 {
		name = nodeName(names[0])
	}
	ctx := cmd.Context()
	n, err := fetchNode(ctx, c, name)
	if err != nil {
		return err
	}
	pods, err := c.Pods(ctx)
	if err != nil {
		return err
	}
	var events v1.EventList
	if err := c.GetJSON(ctx, "/node/events", nil, &events); err != nil {
		return err
	}
	return describeNode(cmd.OutOrStdout(), n, pods, events.Items, clock())
}

func describeNode(w io.Writer, n *v1.Node, pods []v1.Pod, events []v1.Event, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	p := prefixWriter{tw}
	p.line(0, "Name:\t%s", n.Name)
	p.line(0, "Roles:\t%s", strings.Join(nodeRoles(n), ","))
	writeMap(p, "Labels", n.Labels)
	writeMap(p, "Annotations", n.Annotations)
	p.line(0, "CreationTimestamp:\t%s", n.CreationTimestamp.Format(time.RFC1123Z))
	if len(n.Spec.Taints) == 0 {
		p.line(0, "Taints:\t<none>")
	}
	for i, t := range n.Spec.Taints {
		title := ""
		if i == 0 {
			title = "Taints:"
		}
		p.line(0, "%s\t%s", title, t.ToString())
	}
	p.line(0, "Unschedulable:\t%v", n.Spec.Unschedulable)
	if len(n.Status.Conditions) > 0 {
		p.line(0, "Conditions:")
		p.line(1, "Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage")
		p.line(1, "----\t------\t-----------------\t------------------\t------\t-------")
		for _, c := range n.Status.Conditions {
			p.line(1, "%v \t%v \t%s \t%s \t%v \t%v", c.Type, c.Status, c.LastHeartbeatTime.Format(time.RFC1123Z),
				c.LastTransitionTime.Format(time.RFC1123Z), c.Reason, c.Message)
		}
	}
	p.line(0, "Addresses:")
	for _, a := range n.Status.Addresses {
		p.line(1, "%s:\t%s", a.Type, a.Address)
	}
	writeResources := func(title string, l v1.ResourceList) {
		if len(l) == 0 {
			return
		}
		p.line(0, "%s:", title)
		for _, k := range sortedResources(l) {
			q := l[k]
			p.line(1, "%s:\t%s", k, q.String())
		}
	}
	writeResources("Capacity", n.Status.Capacity)
	writeResources("Allocatable", n.Status.Allocatable)
	info := n.Status.NodeInfo
	p.line(0, "System Info:")
	p.line(1, "Machine ID:\t%s", info.MachineID)
	p.line(1, "System UUID:\t%s", info.SystemUUID)
	p.line(1, "Boot ID:\t%s", info.BootID)
	p.line(1, "Kernel Version:\t%s", info.KernelVersion)
	p.line(1, "OS Image:\t%s", info.OSImage)
	p.line(1, "Operating System:\t%s", info.OperatingSystem)
	p.line(1, "Architecture:\t%s", info.Architecture)
	p.line(1, "Container Runtime Version:\t%s", info.ContainerRuntimeVersion)
	p.line(1, "Kubelet Version:\t%s", info.KubeletVersion)
	if n.Spec.PodCIDR != "" {
		p.line(0, "PodCIDR:\t%s", n.Spec.PodCIDR)
	}
	describeNodePods(p, n, pods, now)
	if err := tw.Flush(); err != nil {
		return err
	}
	return describeEvents(w, events, now)
}

// describeNodePods writes the pods still holding resources and what they request and limit, as
// shares of the node's allocatable, as kubectl does.
func describeNodePods(p prefixWriter, n *v1.Node, pods []v1.Pod, now time.Time) {
	var active []v1.Pod
	for _, pod := range pods {
		if pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed {
			active = append(active, pod)
		}
	}
	sort.Slice(active, func(i, j int) bool {
		if active[i].Namespace != active[j].Namespace {
			return active[i].Namespace < active[j].Namespace
		}
		return active[i].Name < active[j].Name
	})
	alloc := n.Status.Allocatable
	if len(alloc) == 0 {
		alloc = n.Status.Capacity
	}
	share := func(q resource.Quantity, name v1.ResourceName) string {
		total := alloc[name]
		pct := int64(0)
		if name == v1.ResourceCPU {
			if t := total.MilliValue(); t > 0 {
				pct = int64(float64(q.MilliValue()) / float64(t) * 100)
			}
		} else if t := total.Value(); t > 0 {
			pct = int64(float64(q.Value()) / float64(t) * 100)
		}
		return fmt.Sprintf("%s (%d%%)", q.String(), pct)
	}
	p.line(0, "Non-terminated Pods:\t(%d in total)", len(active))
	p.line(1, "Namespace\tName\t\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge")
	p.line(1, "---------\t----\t\t------------\t----------\t---------------\t-------------\t---")
	reqs, lims := v1.ResourceList{}, v1.ResourceList{}
	for i := range active {
		pod := &active[i]
		r, l := podRequestsAndLimits(pod)
		addTo(reqs, r)
		addTo(lims, l)
		p.line(1, "%s\t%s\t\t%s\t%s\t%s\t%s\t%s", pod.Namespace, pod.Name,
			share(r[v1.ResourceCPU], v1.ResourceCPU), share(l[v1.ResourceCPU], v1.ResourceCPU),
			share(r[v1.ResourceMemory], v1.ResourceMemory), share(l[v1.ResourceMemory], v1.ResourceMemory),
			age(podCreated(pod), now))
	}
	p.line(0, "Allocated resources:")
	p.line(1, "(Total limits may be over 100 percent, i.e., overcommitted.)")
	p.line(1, "Resource\tRequests\tLimits")
	p.line(1, "--------\t--------\t------")
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage} {
		p.line(1, "%s\t%s\t%s", name, share(reqs[name], name), share(lims[name], name))
	}
}

// podRequestsAndLimits is what a pod holds of the node, counted as the scheduler and kubectl do
// (sidecars, init containers one at a time, overhead).
func podRequestsAndLimits(pod *v1.Pod) (reqs, lims v1.ResourceList) {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}),
		resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
}

func addTo(sum, l v1.ResourceList) {
	for k, q := range l {
		s := sum[k]
		s.Add(q)
		sum[k] = s
	}
}
