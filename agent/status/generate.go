// Package status computes a pod's API status from what the runtime reports (Generate, pure) and keeps
// it: locally for standalone use and the agent's API, and in the apiserver (patched only on change).
package status

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// Inputs are what Generate reads besides the pod and its observed status.
type Inputs struct {
	Reasons     *kubecontainer.ReasonCache
	RuntimeName string // container ID prefix, e.g. "containerd"
	NodeIPs     []string
	Now         time.Time
	// Terminating: the pod is being killed, so stopped containers are not "waiting" to restart.
	Terminating bool
	// Probes gives readiness and startup results; nil means a running container is ready.
	Probes ProbeResults
	// ResizeConditions are the pod's PodResizePending and PodResizeInProgress conditions, as the
	// allocation manager keeps them.
	ResizeConditions []v1.PodCondition
	// Actuated gives the resources last handed to the runtime for a container (the allocation
	// manager's record); nil reports the allocated ones.
	Actuated func(container string) (v1.ResourceRequirements, bool)
	// RecursiveReadOnlyMounts: the pod's runtime handler takes recursive read-only mounts.
	RecursiveReadOnlyMounts bool
}

// ProbeResults are the prober's answers for running containers.
type ProbeResults interface {
	Ready(c *v1.Container, containerID string) bool
	Started(c *v1.Container, containerID string) bool
}

// Generate computes the pod's status. old is the last status, whose start time and condition
// transition times are kept when nothing changed.
func Generate(pod *v1.Pod, ps *kubecontainer.PodStatus, old v1.PodStatus, in Inputs) v1.PodStatus {
	s := v1.PodStatus{
		StartTime: old.StartTime,
		QOSClass:  kubecontainer.PodQOSClass(pod),
	}
	if s.StartTime == nil {
		t := metav1.NewTime(in.Now)
		s.StartTime = &t
	}
	if len(in.NodeIPs) > 0 {
		s.HostIP = in.NodeIPs[0]
		for _, ip := range in.NodeIPs {
			s.HostIPs = append(s.HostIPs, v1.HostIP{IP: ip})
		}
	}
	ips := ps.IPs
	if pod.Spec.HostNetwork {
		ips = in.NodeIPs
	}
	if len(ips) > 0 {
		s.PodIP = ips[0]
		for _, ip := range ips {
			s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
		}
	}
	s.InitContainerStatuses = containerStatuses(pod, pod.Spec.InitContainers, ps, old.InitContainerStatuses, in, initContainer)
	s.ContainerStatuses = containerStatuses(pod, pod.Spec.Containers, ps, old.ContainerStatuses, in, appContainer)
	// Debug containers are reported, but the phase and the conditions below read only the two lists
	// above: a debug container neither makes a pod ready nor keeps it from being so.
	s.EphemeralContainerStatuses = containerStatuses(pod, ephemeralSpecs(pod), ps, old.EphemeralContainerStatuses, in, ephemeralContainer)
	s.Phase = getPhase(pod, s.InitContainerStatuses, s.ContainerStatuses, in.Terminating)
	if s.Phase == v1.PodFailed || s.Phase == v1.PodSucceeded {
		if old.Phase == s.Phase {
			s.Reason, s.Message = old.Reason, old.Message
		}
	}
	s.Conditions = conditions(pod, &s, ps, old.Conditions, in)
	s.ObservedGeneration = observedGeneration(pod, old)
	return s
}

// observedGeneration is the pod generation this status answers (PodObservedGenerationTracking, on
// by default since 1.34). It never goes back: a sync working from an older copy of the pod must
// not undo what a newer one reported.
func observedGeneration(pod *v1.Pod, old v1.PodStatus) int64 {
	return max(pod.Generation, old.ObservedGeneration)
}

func containerID(runtimeName, id string) string {
	if runtimeName == "" {
		runtimeName = "cri"
	}
	return runtimeName + "://" + id
}

func terminatedState(c *kubecontainer.Status, runtimeName string) *v1.ContainerStateTerminated {
	reason := c.Reason
	if reason == "" {
		reason = "Error"
		if c.ExitCode == 0 {
			reason = "Completed"
		}
	}
	return &v1.ContainerStateTerminated{
		ExitCode: c.ExitCode, Reason: reason, Message: c.Message,
		StartedAt: metav1.NewTime(c.StartedAt), FinishedAt: metav1.NewTime(c.FinishedAt),
		ContainerID: containerID(runtimeName, c.ID),
	}
}

// containerKind says which list of the pod a container is in, which decides its readiness and
// whether it runs again.
type containerKind int

const (
	appContainer containerKind = iota
	initContainer
	ephemeralContainer
)

// ephemeralSpecs are the pod's debug containers as the Containers they share their fields with.
func ephemeralSpecs(pod *v1.Pod) []v1.Container {
	var out []v1.Container
	for _, ec := range pod.Spec.EphemeralContainers {
		out = append(out, v1.Container(ec.EphemeralContainerCommon))
	}
	return out
}

func containerStatuses(pod *v1.Pod, specs []v1.Container, ps *kubecontainer.PodStatus, old []v1.ContainerStatus, in Inputs, kind containerKind) []v1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	init, ephemeral := kind == initContainer, kind == ephemeralContainer
	oldByName := map[string]v1.ContainerStatus{}
	for _, o := range old {
		oldByName[o.Name] = o
	}
	out := make([]v1.ContainerStatus, 0, len(specs))
	for _, spec := range specs {
		st := v1.ContainerStatus{Name: spec.Name, Image: spec.Image, VolumeMounts: volumeMountStatuses(&spec, in.RecursiveReadOnlyMounts)}
		attempts := ps.ContainersByName(spec.Name)
		f := false
		if !ephemeral {
			// No probe ever starts a debug container: as the kubelet, its status has no started.
			st.Started = &f
		}
		if len(attempts) == 0 {
			// As the kubelet: in a pod with init containers every container not yet made waits
			// with PodInitializing, the first init container included.
			reason := kubecontainer.ReasonContainerCreating
			if len(pod.Spec.InitContainers) > 0 {
				reason = kubecontainer.ReasonPodInitializing
			}
			msg := ""
			if r, ok := in.Reasons.Get(pod.UID, spec.Name); ok {
				reason, msg = r.Reason, r.Message
			}
			st.State.Waiting = &v1.ContainerStateWaiting{Reason: reason, Message: msg}
			if o, ok := oldByName[spec.Name]; ok {
				// The runtime lost the container (the sandbox was recreated); keep counting.
				st.RestartCount = o.RestartCount
				st.LastTerminationState = o.LastTerminationState
			}
			out = append(out, st)
			continue
		}
		cur := attempts[0]
		st.RestartCount = int32(cur.RestartCount)
		st.AllocatedResources = spec.Resources.Requests.DeepCopy()
		var oldSt *v1.ContainerStatus
		if o, ok := oldByName[spec.Name]; ok {
			oldSt = &o
		}
		st.ImageID = cur.ImageRef
		if st.ImageID == "" {
			st.ImageID = cur.ImageID
		}
		st.ContainerID = containerID(in.RuntimeName, cur.ID)
		st.User = cur.User
		st.Resources = statusResources(&spec, cur, st.ContainerID, oldSt, in.Actuated)
		switch cur.State {
		case kubecontainer.StateRunning:
			started, ready := true, true
			switch {
			case ephemeral:
				// Not part of the workload: it is never ready, whatever it does.
				ready = false
			case init && !isSidecar(&spec):
				// A running init container has not done its part yet; it is ready once it succeeded.
				ready = false
			case in.Probes != nil:
				started, ready = in.Probes.Started(&spec, cur.ID), in.Probes.Ready(&spec, cur.ID)
			}
			if !ephemeral {
				st.Started = &started
			}
			st.Ready = ready
			st.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cur.StartedAt)}
			if len(attempts) > 1 && attempts[1].State == kubecontainer.StateExited {
				st.LastTerminationState.Terminated = terminatedState(attempts[1], in.RuntimeName)
			}
		case kubecontainer.StateExited:
			term := terminatedState(cur, in.RuntimeName)
			r, waiting := in.Reasons.Get(pod.UID, spec.Name)
			if waiting && !in.Terminating && !ephemeral && willRestart(pod, &spec, cur, init) {
				st.State.Waiting = &v1.ContainerStateWaiting{Reason: r.Reason, Message: r.Message}
				st.LastTerminationState.Terminated = term
			} else {
				st.State.Terminated = term
				// An init container that succeeded has done its part: the kubelet reports it ready.
				st.Ready = init && !isSidecar(&spec) && cur.ExitCode == 0
				if len(attempts) > 1 && attempts[1].State == kubecontainer.StateExited {
					st.LastTerminationState.Terminated = terminatedState(attempts[1], in.RuntimeName)
				}
			}
		default:
			reason := kubecontainer.ReasonContainerCreating
			msg := ""
			if r, ok := in.Reasons.Get(pod.UID, spec.Name); ok {
				reason, msg = r.Reason, r.Message
			}
			st.State.Waiting = &v1.ContainerStateWaiting{Reason: reason, Message: msg}
			if len(attempts) > 1 && attempts[1].State == kubecontainer.StateExited {
				st.LastTerminationState.Terminated = terminatedState(attempts[1], in.RuntimeName)
			}
		}
		out = append(out, st)
	}
	return out
}

func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// sidecarStarted: a sidecar counts as initialized once it has run at all.
func sidecarStarted(s v1.ContainerStatus) bool {
	return s.State.Waiting == nil || s.RestartCount > 0 || s.LastTerminationState.Terminated != nil
}

func willRestart(pod *v1.Pod, spec *v1.Container, c *kubecontainer.Status, init bool) bool {
	if init && isSidecar(spec) {
		return true
	}
	switch pod.Spec.RestartPolicy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return c.ExitCode != 0
	}
	return !init || c.ExitCode != 0
}

// getPhase follows the kubelet's rules.
func getPhase(pod *v1.Pod, inits, apps []v1.ContainerStatus, terminating bool) v1.PodPhase {
	pendingInit := 0
	for i, s := range inits {
		if i < len(pod.Spec.InitContainers) && isSidecar(&pod.Spec.InitContainers[i]) {
			// A sidecar counts as initialized once it has started.
			if !sidecarStarted(s) {
				pendingInit++
			}
			continue
		}
		switch {
		case s.State.Terminated != nil && s.State.Terminated.ExitCode == 0:
		case s.State.Terminated != nil && pod.Spec.RestartPolicy == v1.RestartPolicyNever:
			return v1.PodFailed
		default:
			pendingInit++
		}
	}
	var running, waiting, stopped, succeeded int
	for _, s := range apps {
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case s.State.Waiting != nil:
			if s.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		}
	}
	switch {
	case pendingInit > 0 && !(terminating && running == 0 && waiting == 0):
		return v1.PodPending
	case waiting > 0:
		return v1.PodPending
	case running > 0:
		return v1.PodRunning
	case stopped > 0:
		if !terminating && pod.Spec.RestartPolicy == v1.RestartPolicyAlways {
			return v1.PodRunning
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		if !terminating && pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure {
			return v1.PodRunning
		}
		return v1.PodFailed
	}
	return v1.PodPending
}

func conditions(pod *v1.Pod, s *v1.PodStatus, ps *kubecontainer.PodStatus, old []v1.PodCondition, in Inputs) []v1.PodCondition {
	now := in.Now
	oldBy := map[v1.PodConditionType]v1.PodCondition{}
	for _, c := range old {
		oldBy[c.Type] = c
	}
	mk := func(t v1.PodConditionType, ok bool, reason, message string) v1.PodCondition {
		st := v1.ConditionFalse
		if ok {
			st = v1.ConditionTrue
		}
		c := v1.PodCondition{Type: t, Status: st, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(now),
			ObservedGeneration: pod.Generation}
		if o, found := oldBy[t]; found && o.Status == st {
			c.LastTransitionTime = o.LastTransitionTime
		}
		return c
	}
	// Conditions others own (readiness gates, DisruptionTarget…) are kept as the apiserver has
	// them: the status patch replaces the whole list.
	var others []v1.PodCondition
	for _, c := range pod.Status.Conditions {
		if !ownedCondition(c.Type) {
			others = append(others, c)
		}
	}
	initOK, initReason, initMsg := initializedCondition(pod, s)
	ctrOK, ctrReason, ctrMsg := containersReadyCondition(pod, s)
	readyOK, readyReason, readyMsg := ctrOK, ctrReason, ctrMsg
	if ctrOK {
		readyOK, readyReason, readyMsg = readinessGates(pod, others)
	}
	others = append(others, in.ResizeConditions...)
	conds := append(others,
		mk(v1.PodReadyToStartContainers, ps.ReadySandbox() != nil, "", ""),
		mk(v1.PodInitialized, initOK, initReason, initMsg),
		mk(v1.PodReady, readyOK, readyReason, readyMsg),
		mk(v1.ContainersReady, ctrOK, ctrReason, ctrMsg),
		mk(v1.PodScheduled, true, "", ""),
	)
	sort.SliceStable(conds, func(i, j int) bool { return conds[i].Type < conds[j].Type })
	return conds
}

// ownedCondition: the agent sets this condition type; any other belongs to someone else.
func ownedCondition(t v1.PodConditionType) bool {
	switch t {
	case v1.PodScheduled, v1.PodReady, v1.PodInitialized, v1.ContainersReady, v1.PodReadyToStartContainers,
		v1.PodResizeInProgress, v1.PodResizePending:
		return true
	}
	return false
}

// readinessGates: a pod whose containers are ready is ready once each of its readiness gates'
// conditions is True.
func readinessGates(pod *v1.Pod, conds []v1.PodCondition) (bool, string, string) {
	var msgs []string
	for _, g := range pod.Spec.ReadinessGates {
		var found *v1.PodCondition
		for i := range conds {
			if conds[i].Type == g.ConditionType {
				found = &conds[i]
				break
			}
		}
		switch {
		case found == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
		case found.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, found.Status))
		}
	}
	if len(msgs) > 0 {
		return false, "ReadinessGatesNotReady", strings.Join(msgs, ", ")
	}
	return true, "", ""
}

// namesList formats names as the kubelet's condition messages do: [a b].
func namesList(names []string) string {
	return "[" + strings.Join(names, " ") + "]"
}

// initializedCondition: every init container has succeeded (a sidecar: has started). A pod whose
// app containers have run stays initialized while a sidecar restarts; a succeeded pod says
// PodCompleted; otherwise the message names the init containers still to complete, in spec order.
func initializedCondition(pod *v1.Pod, s *v1.PodStatus) (bool, string, string) {
	var incomplete []string
	for i := range pod.Spec.InitContainers {
		spec := &pod.Spec.InitContainers[i]
		st, ok := findStatus(s.InitContainerStatuses, spec.Name)
		switch {
		case !ok:
			incomplete = append(incomplete, spec.Name)
		case isSidecar(spec):
			if st.Started == nil || !*st.Started {
				incomplete = append(incomplete, spec.Name)
			}
		case !st.Ready:
			incomplete = append(incomplete, spec.Name)
		}
	}
	if s.Phase == v1.PodSucceeded {
		return true, reasonPodCompleted, ""
	}
	if len(incomplete) == 0 || anyAppContainerStarted(s.ContainerStatuses) {
		return true, "", ""
	}
	return false, "ContainersNotInitialized", "containers with incomplete status: " + namesList(incomplete)
}

// containersReadyCondition: every sidecar and app container is ready. A pod that has ended is not
// ready, with PodCompleted or PodFailed; otherwise the message names the unready containers,
// sidecars first, in spec order.
func containersReadyCondition(pod *v1.Pod, s *v1.PodStatus) (bool, string, string) {
	switch s.Phase {
	case v1.PodSucceeded:
		return false, reasonPodCompleted, ""
	case v1.PodFailed:
		return false, reasonPodFailed, ""
	}
	var unready []string
	for i := range pod.Spec.InitContainers {
		if spec := &pod.Spec.InitContainers[i]; isSidecar(spec) {
			if st, ok := findStatus(s.InitContainerStatuses, spec.Name); !ok || !st.Ready {
				unready = append(unready, spec.Name)
			}
		}
	}
	for _, spec := range pod.Spec.Containers {
		if st, ok := findStatus(s.ContainerStatuses, spec.Name); !ok || !st.Ready {
			unready = append(unready, spec.Name)
		}
	}
	if len(unready) > 0 {
		return false, "ContainersNotReady", "containers with unready status: " + namesList(unready)
	}
	return true, "", ""
}

const (
	reasonPodCompleted = "PodCompleted"
	reasonPodFailed    = "PodFailed"
)

func findStatus(statuses []v1.ContainerStatus, name string) (v1.ContainerStatus, bool) {
	for _, st := range statuses {
		if st.Name == name {
			return st, true
		}
	}
	return v1.ContainerStatus{}, false
}

func anyAppContainerStarted(statuses []v1.ContainerStatus) bool {
	for _, st := range statuses {
		if st.State.Running != nil || st.State.Terminated != nil {
			return true
		}
	}
	return false
}
