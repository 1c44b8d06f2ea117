package app

import (
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// newDescribeCmd is `nodelet describe pod NAME` and `nodelet describe node [NAME]`: status,
// conditions, container states or the node's pods and resources, and events, laid out as kubectl
// describe does.
func newDescribeCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "describe pod NAME | node [NAME]",
		Short: "Show a pod or the node in detail, with its events (like kubectl describe)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if isNodeKind(args[0]) {
				return describeNodeCmd(cmd, &cf, args[1:])
			}
			switch strings.ToLower(args[0]) {
			case "pods", "pod", "po":
			default:
				return fmt.Errorf("the server doesn't have a resource type %q (nodelet describe knows pods and nodes)", args[0])
			}
			if len(args) != 2 {
				return fmt.Errorf("describe pod needs the pod's name")
			}
			c, pod, err := cf.pod(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			var events v1.EventList
			if err := c.GetJSON(cmd.Context(), "/events/"+url.PathEscape(pod.Namespace)+"/"+url.PathEscape(pod.Name), nil, &events); err != nil {
				return err
			}
			return describePod(cmd.OutOrStdout(), pod, events.Items, clock())
		},
	}
	cf.bind(cmd, false)
	return cmd
}

// prefixWriter writes "Key:<tab>value" lines at an indent level through one tabwriter, so values
// line up as kubectl's describe output does.
type prefixWriter struct{ tw *tabwriter.Writer }

func (p prefixWriter) line(level int, format string, a ...any) {
	fmt.Fprintf(p.tw, strings.Repeat("  ", level)+format+"\n", a...)
}

func describePod(w io.Writer, pod *v1.Pod, events []v1.Event, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	p := prefixWriter{tw}
	p.line(0, "Name:\t%s", pod.Name)
	p.line(0, "Namespace:\t%s", pod.Namespace)
	prio := int32(0)
	if pod.Spec.Priority != nil {
		prio = *pod.Spec.Priority
	}
	p.line(0, "Priority:\t%d", prio)
	if pod.Spec.PriorityClassName != "" {
		p.line(0, "Priority Class Name:\t%s", pod.Spec.PriorityClassName)
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	p.line(0, "Service Account:\t%s", sa)
	node := pod.Spec.NodeName
	if node == "" {
		node = "<none>"
	} else if pod.Status.HostIP != "" {
		node += "/" + pod.Status.HostIP
	}
	p.line(0, "Node:\t%s", node)
	if pod.Status.StartTime != nil {
		p.line(0, "Start Time:\t%s", pod.Status.StartTime.Format(time.RFC1123Z))
	}
	writeMap(p, "Labels", pod.Labels)
	writeMap(p, "Annotations", pod.Annotations)
	if pod.DeletionTimestamp != nil {
		p.line(0, "Status:\tTerminating (lasts %s)", duration.HumanDuration(now.Sub(pod.DeletionTimestamp.Time)))
	} else {
		p.line(0, "Status:\t%s", podStatusPhase(pod))
	}
	if pod.Status.Reason != "" {
		p.line(0, "Reason:\t%s", pod.Status.Reason)
	}
	if pod.Status.Message != "" {
		p.line(0, "Message:\t%s", pod.Status.Message)
	}
	p.line(0, "IP:\t%s", pod.Status.PodIP)
	if len(pod.Status.PodIPs) > 0 {
		p.line(0, "IPs:\t")
		for _, ip := range pod.Status.PodIPs {
			p.line(1, "IP:\t%s", ip.IP)
		}
	} else {
		p.line(0, "IPs:\t<none>")
	}
	if len(pod.Spec.InitContainers) > 0 {
		p.line(0, "Init Containers:")
		describeContainers(p, pod.Spec.InitContainers, pod.Status.InitContainerStatuses)
	}
	p.line(0, "Containers:")
	describeContainers(p, pod.Spec.Containers, pod.Status.ContainerStatuses)
	if len(pod.Status.Conditions) > 0 {
		p.line(0, "Conditions:")
		p.line(1, "Type\tStatus")
		for _, c := range pod.Status.Conditions {
			p.line(1, "%v \t%v ", c.Type, c.Status)
		}
	}
	if len(pod.Spec.Volumes) == 0 {
		p.line(0, "Volumes:\t<none>")
	} else {
		p.line(0, "Volumes:")
		for _, v := range pod.Spec.Volumes {
			p.line(1, "%s:", v.Name)
			p.line(2, "Type:\t%s", volumeType(v))
		}
	}
	if pod.Status.QOSClass != "" {
		p.line(0, "QoS Class:\t%s", pod.Status.QOSClass)
	}
	writeMap(p, "Node-Selectors", pod.Spec.NodeSelector)
	if len(pod.Spec.Tolerations) == 0 {
		p.line(0, "Tolerations:\t<none>")
	} else {
		p.line(0, "Tolerations:\t%s", toleration(pod.Spec.Tolerations[0]))
		for _, t := range pod.Spec.Tolerations[1:] {
			p.line(0, "\t%s", toleration(t))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return describeEvents(w, events, now)
}

func podStatusPhase(pod *v1.Pod) v1.PodPhase {
	if pod.Status.Phase == "" {
		return v1.PodPending
	}
	return pod.Status.Phase
}

func writeMap(p prefixWriter, title string, m map[string]string) {
	if len(m) == 0 {
		p.line(0, "%s:\t<none>", title)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i == 0 {
			p.line(0, "%s:\t%s=%s", title, k, m[k])
		} else {
			p.line(0, "\t%s=%s", k, m[k])
		}
	}
}

func describeContainers(p prefixWriter, specs []v1.Container, statuses []v1.ContainerStatus) {
	byName := map[string]v1.ContainerStatus{}
	for _, s := range statuses {
		byName[s.Name] = s
	}
	for _, c := range specs {
		st, ok := byName[c.Name]
		p.line(1, "%s:", c.Name)
		if ok && st.ContainerID != "" {
			p.line(2, "Container ID:\t%s", st.ContainerID)
		}
		p.line(2, "Image:\t%s", c.Image)
		if ok {
			p.line(2, "Image ID:\t%s", st.ImageID)
		}
		ports := "<none>"
		hostPorts := "<none>"
		if len(c.Ports) > 0 {
			var ps, hs []string
			for _, port := range c.Ports {
				proto := port.Protocol
				if proto == "" {
					proto = v1.ProtocolTCP
				}
				ps = append(ps, fmt.Sprintf("%d/%s", port.ContainerPort, proto))
				hs = append(hs, fmt.Sprintf("%d/%s", port.HostPort, proto))
			}
			ports, hostPorts = strings.Join(ps, ", "), strings.Join(hs, ", ")
		}
		p.line(2, "Port:\t%s", ports)
		p.line(2, "Host Port:\t%s", hostPorts)
		if len(c.Command) > 0 {
			p.line(2, "Command:")
			for _, a := range c.Command {
				p.line(3, "%s", a)
			}
		}
		if len(c.Args) > 0 {
			p.line(2, "Args:")
			for _, a := range c.Args {
				p.line(3, "%s", a)
			}
		}
		if ok {
			describeState(p, "State", st.State)
			if st.LastTerminationState.Terminated != nil {
				describeState(p, "Last State", st.LastTerminationState)
			}
			p.line(2, "Ready:\t%s", titleBool(st.Ready))
			p.line(2, "Restart Count:\t%d", st.RestartCount)
		} else {
			p.line(2, "State:\tWaiting")
			p.line(2, "Ready:\tFalse")
			p.line(2, "Restart Count:\t0")
		}
		if len(c.Resources.Limits) > 0 {
			p.line(2, "Limits:")
			for _, k := range sortedResources(c.Resources.Limits) {
				q := c.Resources.Limits[k]
				p.line(3, "%s:\t%s", k, q.String())
			}
		}
		if len(c.Resources.Requests) > 0 {
			p.line(2, "Requests:")
			for _, k := range sortedResources(c.Resources.Requests) {
				q := c.Resources.Requests[k]
				p.line(3, "%s:\t%s", k, q.String())
			}
		}
		if len(c.Env) == 0 {
			p.line(2, "Environment:\t<none>")
		} else {
			p.line(2, "Environment:")
			for _, e := range c.Env {
				v := e.Value
				if e.ValueFrom != nil {
					v = "<set from a source>"
				}
				p.line(3, "%s:\t%s", e.Name, v)
			}
		}
		if len(c.VolumeMounts) == 0 {
			p.line(2, "Mounts:\t<none>")
		} else {
			p.line(2, "Mounts:")
			for _, m := range c.VolumeMounts {
				mode := "rw"
				if m.ReadOnly {
					mode = "ro"
				}
				p.line(3, "%s from %s (%s)", m.MountPath, m.Name, mode)
			}
		}
	}
}

func sortedResources(l v1.ResourceList) []v1.ResourceName {
	var out []v1.ResourceName
	for k := range l {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func describeState(p prefixWriter, title string, s v1.ContainerState) {
	switch {
	case s.Running != nil:
		p.line(2, "%s:\tRunning", title)
		p.line(3, "Started:\t%s", s.Running.StartedAt.Format(time.RFC1123Z))
	case s.Waiting != nil:
		p.line(2, "%s:\tWaiting", title)
		if s.Waiting.Reason != "" {
			p.line(3, "Reason:\t%s", s.Waiting.Reason)
		}
		if s.Waiting.Message != "" {
			p.line(3, "Message:\t%s", s.Waiting.Message)
		}
	case s.Terminated != nil:
		p.line(2, "%s:\tTerminated", title)
		if s.Terminated.Reason != "" {
			p.line(3, "Reason:\t%s", s.Terminated.Reason)
		}
		if s.Terminated.Message != "" {
			p.line(3, "Message:\t%s", s.Terminated.Message)
		}
		p.line(3, "Exit Code:\t%d", s.Terminated.ExitCode)
		if s.Terminated.Signal != 0 {
			p.line(3, "Signal:\t%d", s.Terminated.Signal)
		}
		p.line(3, "Started:\t%s", s.Terminated.StartedAt.Format(time.RFC1123Z))
		p.line(3, "Finished:\t%s", s.Terminated.FinishedAt.Format(time.RFC1123Z))
	default:
		p.line(2, "%s:\tWaiting", title)
	}
}

func volumeType(v v1.Volume) string {
	switch {
	case v.HostPath != nil:
		return "HostPath (bare host directory volume) " + v.HostPath.Path
	case v.EmptyDir != nil:
		return "EmptyDir (a temporary directory that shares a pod's lifetime)"
	case v.ConfigMap != nil:
		return "ConfigMap (a volume populated by a ConfigMap) " + v.ConfigMap.Name
	case v.Secret != nil:
		return "Secret (a volume populated by a Secret) " + v.Secret.SecretName
	case v.Projected != nil:
		return "Projected (a volume that contains injected data from multiple sources)"
	case v.PersistentVolumeClaim != nil:
		return "PersistentVolumeClaim " + v.PersistentVolumeClaim.ClaimName
	}
	return "<unknown>"
}

func toleration(t v1.Toleration) string {
	s := t.Key
	if t.Value != "" {
		s += "=" + t.Value
	}
	if t.Effect != "" {
		s += ":" + string(t.Effect)
	}
	if t.Operator == v1.TolerationOpExists && t.Value == "" {
		s += " op=Exists"
	}
	if t.TolerationSeconds != nil {
		s += fmt.Sprintf(" for %ds", *t.TolerationSeconds)
	}
	return s
}

func describeEvents(w io.Writer, events []v1.Event, now time.Time) error {
	if len(events) == 0 {
		_, err := fmt.Fprintln(w, "Events:                      <none>")
		return err
	}
	fmt.Fprintln(w, "Events:")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  Type\tReason\tAge\tFrom\tMessage")
	fmt.Fprintln(tw, "  ----\t------\t----\t----\t-------")
	sort.SliceStable(events, func(i, j int) bool { return eventTime(events[i]).Before(eventTime(events[j])) })
	for _, e := range events {
		a := duration.HumanDuration(now.Sub(eventTime(e)))
		if e.Count > 1 {
			a = fmt.Sprintf("%s (x%d over %s)", duration.HumanDuration(now.Sub(e.LastTimestamp.Time)), e.Count, duration.HumanDuration(now.Sub(e.FirstTimestamp.Time)))
		}
		from := e.Source.Component
		if from == "" {
			from = e.ReportingController
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, a, from, strings.TrimSpace(e.Message))
	}
	return tw.Flush()
}

func eventTime(e v1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

func titleBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}
