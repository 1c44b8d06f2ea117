package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
)

// newGetCmd is `nodelet get pods [NAME...] [-o wide|yaml|json] [-A]`, kubectl's columns.
func newGetCmd() *cobra.Command {
	var cf clientFlags
	var output string
	var noHeaders, watch bool
	var selector string
	cmd := &cobra.Command{
		Use:   "get pods|nodes [NAME...]",
		Short: "List the agent's pods or its node (like kubectl get pods, kubectl get nodes)",
		Example: `  nodelet get pods
  nodelet get pods -A -o wide
  nodelet get pod web -o yaml
  nodelet get nodes -o wide`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			node := isNodeKind(args[0])
			switch strings.ToLower(args[0]) {
			case "pods", "pod", "po":
			default:
				if !node {
					return fmt.Errorf("the server doesn't have a resource type %q (nodelet get knows pods and nodes)", args[0])
				}
			}
			switch output {
			case "", "wide", "yaml", "json", "name":
			default:
				return fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: json,name,wide,yaml", output)
			}
			if node {
				return getNodes(cmd, &cf, args[1:], output, noHeaders)
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			pods, err := c.Pods(cmd.Context())
			if err != nil {
				return err
			}
			sel, err := labels.Parse(selector)
			if err != nil {
				return fmt.Errorf("--selector: %w", err)
			}
			pods, err = selectPods(pods, cf.namespace, cf.allNS, args[1:])
			if err != nil {
				return err
			}
			pods = matchLabels(pods, sel)
			out := cmd.OutOrStdout()
			single := len(args) == 2
			switch output {
			case "json", "yaml":
				return printObjects(out, pods, single, output)
			case "name":
				for _, p := range pods {
					fmt.Fprintf(out, "pod/%s\n", p.Name)
				}
				return nil
			}
			if watch {
				return watchPods(cmd.Context(), out, pods, func() ([]v1.Pod, error) {
					all, err := c.Pods(cmd.Context())
					if err != nil {
						return nil, err
					}
					all, err = selectPods(all, cf.namespace, cf.allNS, nil)
					return matchLabels(all, sel), err
				}, args[1:], cf.allNS, output == "wide", noHeaders)
			}
			if len(pods) == 0 {
				if cf.allNS {
					fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
				} else {
					fmt.Fprintf(cmd.ErrOrStderr(), "No resources found in %s namespace.\n", cf.namespace)
				}
				return nil
			}
			return printPodTable(out, pods, cf.allNS, output == "wide", noHeaders, clock())
		},
	}
	cf.bind(cmd, true)
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, yaml, json or name")
	cmd.Flags().BoolVar(&noHeaders, "no-headers", false, "leave out the header line")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector, e.g. app=web,tier!=db")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after listing, print a pod's row again whenever it changes")
	return cmd
}

// watchPoll is how often `get pods -w` asks the agent; the API has no watch, and a person
// watching a terminal does not need it sooner.
var watchPoll = time.Second

// watchPods prints the table, then a row for each pod whose row (age aside) changed, until ctx
// ends. Names, when given, limit it to those pods.
func watchPods(ctx context.Context, w io.Writer, pods []v1.Pod, list func() ([]v1.Pod, error), names []string, allNS, wide, noHeaders bool) error {
	seen := map[types.UID]string{}
	keep := func(pods []v1.Pod) []v1.Pod {
		if len(names) == 0 {
			return pods
		}
		var out []v1.Pod
		for _, p := range pods {
			if slices.Contains(names, p.Name) {
				out = append(out, p)
			}
		}
		return out
	}
	rowKey := func(p *v1.Pod) string {
		var b bytes.Buffer
		printPodTable(&b, []v1.Pod{*p}, allNS, wide, true, podCreated(p).Time)
		return b.String()
	}
	pods = keep(pods)
	for i := range pods {
		seen[pods[i].UID] = rowKey(&pods[i])
	}
	if err := printPodTable(w, pods, allNS, wide, noHeaders, clock()); err != nil {
		return err
	}
	t := time.NewTicker(watchPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		pods, err := list()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		var changed []v1.Pod
		for _, p := range keep(pods) {
			if k := rowKey(&p); seen[p.UID] != k {
				seen[p.UID] = k
				changed = append(changed, p)
			}
		}
		if len(changed) > 0 {
			if err := printPodTable(w, changed, allNS, wide, true, clock()); err != nil {
				return err
			}
		}
	}
}

func matchLabels(pods []v1.Pod, sel labels.Selector) []v1.Pod {
	if sel.Empty() {
		return pods
	}
	var out []v1.Pod
	for _, p := range pods {
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

// selectPods keeps the namespace's pods (all with allNS), and only names when given; a name not
// found is an error, as kubectl's `Error from server (NotFound)`.
func selectPods(pods []v1.Pod, ns string, allNS bool, names []string) ([]v1.Pod, error) {
	var out []v1.Pod
	for _, p := range pods {
		if allNS || p.Namespace == ns {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	if len(names) == 0 {
		return out, nil
	}
	var picked []v1.Pod
	for _, n := range names {
		found := false
		for _, p := range out {
			if p.Name == n {
				picked = append(picked, p)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("pods %q not found", n)
		}
	}
	return picked, nil
}

func printObjects(w io.Writer, pods []v1.Pod, single bool, format string) error {
	var obj any
	if single && len(pods) == 1 {
		p := pods[0]
		p.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
		obj = &p
	} else {
		items := make([]any, 0, len(pods))
		for i := range pods {
			p := pods[i]
			p.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
			items = append(items, &p)
		}
		obj = map[string]any{"apiVersion": "v1", "kind": "List", "items": items, "metadata": map[string]any{"resourceVersion": ""}}
	}
	return printObject(w, obj, format)
}

func printPodTable(w io.Writer, pods []v1.Pod, allNS, wide, noHeaders bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if !noHeaders {
		h := "NAME\tREADY\tSTATUS\tRESTARTS\tAGE"
		if allNS {
			h = "NAMESPACE\t" + h
		}
		if wide {
			h += "\tIP\tNODE\tNOMINATED NODE\tREADINESS GATES"
		}
		fmt.Fprintln(tw, h)
	}
	for i := range pods {
		p := &pods[i]
		ready, total := readyCount(p)
		row := fmt.Sprintf("%s\t%d/%d\t%s\t%s\t%s", p.Name, ready, total, podStatus(p), restarts(p, now), age(podCreated(p), now))
		if allNS {
			row = p.Namespace + "\t" + row
		}
		if wide {
			ip, node := p.Status.PodIP, p.Spec.NodeName
			if ip == "" {
				ip = "<none>"
			}
			if node == "" {
				node = "<none>"
			}
			gates := "<none>"
			if n := len(p.Spec.ReadinessGates); n > 0 {
				gates = fmt.Sprintf("%d/%d", readyGates(p), n)
			}
			nominated := p.Status.NominatedNodeName
			if nominated == "" {
				nominated = "<none>"
			}
			row += fmt.Sprintf("\t%s\t%s\t%s\t%s", ip, node, nominated, gates)
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// podCreated is when the pod came to be: its creation time, or for a static pod (which has none
// until the apiserver mirrors it) the time the agent started it.
func podCreated(p *v1.Pod) metav1.Time {
	if p.CreationTimestamp.IsZero() && p.Status.StartTime != nil {
		return *p.Status.StartTime
	}
	return p.CreationTimestamp
}

func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// readyCount is kubectl's READY: sidecars (restartable init containers) count among the
// containers, and as ready once started and ready.
func readyCount(p *v1.Pod) (int, int) {
	ready, total := 0, len(p.Spec.Containers)
	sidecars := sidecarNames(p)
	total += len(sidecars)
	for _, c := range p.Status.InitContainerStatuses {
		if sidecars[c.Name] && c.Started != nil && *c.Started && c.Ready {
			ready++
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Ready {
			ready++
		}
	}
	return ready, total
}

// sidecarNames are the pod's init containers that keep running beside its containers.
func sidecarNames(p *v1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			out[c.Name] = true
		}
	}
	return out
}

func readyGates(p *v1.Pod) int {
	n := 0
	for _, g := range p.Spec.ReadinessGates {
		for _, c := range p.Status.Conditions {
			if c.Type == g.ConditionType && c.Status == v1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// restarts is kubectl's "3 (2m ago)".
func restarts(p *v1.Pod, now time.Time) string {
	n := int32(0)
	var last time.Time
	for _, c := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		n += c.RestartCount
		if t := c.LastTerminationState.Terminated; t != nil && t.FinishedAt.After(last) {
			last = t.FinishedAt.Time
		}
	}
	if n > 0 && !last.IsZero() {
		return fmt.Sprintf("%d (%s ago)", n, duration.HumanDuration(now.Sub(last)))
	}
	return fmt.Sprint(n)
}

// podStatus is the STATUS column as kubectl computes it: the pod's reason or phase, overridden by
// an init container still working, then by a container waiting or terminated, then Terminating.
func podStatus(p *v1.Pod) string {
	reason := string(p.Status.Phase)
	if p.Status.Reason != "" {
		reason = p.Status.Reason
	}
	initializing := false
	sidecars := sidecarNames(p)
	for i, c := range p.Status.InitContainerStatuses {
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case sidecars[c.Name] && c.Started != nil && *c.Started:
			continue // a started sidecar lets the next init container run
		case c.State.Terminated != nil:
			if c.State.Terminated.Reason != "" {
				reason = "Init:" + c.State.Terminated.Reason
			} else if c.State.Terminated.Signal != 0 {
				reason = fmt.Sprintf("Init:Signal:%d", c.State.Terminated.Signal)
			} else {
				reason = fmt.Sprintf("Init:ExitCode:%d", c.State.Terminated.ExitCode)
			}
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + c.State.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(p.Spec.InitContainers))
		}
		initializing = true
		break
	}
	if !initializing {
		hasRunning := false
		for i := len(p.Status.ContainerStatuses) - 1; i >= 0; i-- {
			c := p.Status.ContainerStatuses[i]
			switch {
			case c.State.Waiting != nil && c.State.Waiting.Reason != "":
				reason = c.State.Waiting.Reason
			case c.State.Terminated != nil && c.State.Terminated.Reason != "":
				reason = c.State.Terminated.Reason
			case c.State.Terminated != nil && c.State.Terminated.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", c.State.Terminated.Signal)
			case c.State.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", c.State.Terminated.ExitCode)
			case c.Ready && c.State.Running != nil:
				hasRunning = true
			}
		}
		if reason == "Completed" && hasRunning {
			reason = "Running"
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodReady && c.Status != v1.ConditionTrue {
					reason = "NotReady"
				}
			}
		}
	}
	if p.DeletionTimestamp != nil {
		if p.Status.Reason == "NodeLost" {
			return "Unknown"
		}
		return "Terminating"
	}
	return reason
}
