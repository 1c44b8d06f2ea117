package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	// Once the header is out an encoding error can only end the body early.
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) pods(w http.ResponseWriter, r *http.Request) {
	list := &v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	pods := s.d.Pods.Pods()
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, list)
}

// runningPods is what the runtime runs, by labels, whether the agent still wants it or not.
func (s *Server) runningPods(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sbs, err := s.d.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	}})
	if err != nil {
		http.Error(w, fmt.Sprintf("list pod sandboxes: %v", err), http.StatusInternalServerError)
		return
	}
	ctrs, err := s.d.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}})
	if err != nil {
		http.Error(w, fmt.Sprintf("list containers: %v", err), http.StatusInternalServerError)
		return
	}
	byUID := map[string]*v1.Pod{}
	var order []string
	for _, sb := range sbs.GetItems() {
		md := sb.GetMetadata()
		if _, ok := byUID[md.GetUid()]; ok {
			continue
		}
		byUID[md.GetUid()] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: md.GetName(), Namespace: md.GetNamespace(), UID: types.UID(md.GetUid())}}
		order = append(order, md.GetUid())
	}
	for _, c := range ctrs.GetContainers() {
		p := byUID[c.GetLabels()[kubecontainer.LabelPodUID]]
		if p == nil {
			continue
		}
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c.GetMetadata().GetName(), Image: c.GetImage().GetImage()})
	}
	list := &v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	for _, uid := range order {
		list.Items = append(list.Items, *byUID[uid])
	}
	writeJSON(w, list)
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("ns"), r.PathValue("pod")
	if _, ok := s.d.Pods.Pod(ns, name); !ok {
		http.Error(w, fmt.Sprintf("pod %s/%s not found", ns, name), http.StatusNotFound)
		return
	}
	list := &v1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"}}
	if s.d.Events != nil {
		list.Items = s.d.Events.PodEvents(ns, name)
	}
	writeJSON(w, list)
}

// httpError is an error with the status the API answers it with.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func fail(w http.ResponseWriter, err error) {
	if he, ok := err.(*httpError); ok {
		http.Error(w, he.msg, he.code)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// lookupPod finds the pod of a request; uid, when the path has one, must match.
func (s *Server) lookupPod(r *http.Request) (*v1.Pod, error) {
	ns, name := r.PathValue("ns"), r.PathValue("pod")
	pod, ok := s.d.Pods.Pod(ns, name)
	if !ok || (r.PathValue("uid") != "" && string(pod.UID) != r.PathValue("uid")) {
		return nil, &httpError{http.StatusNotFound, fmt.Sprintf("pod %s/%s not found", ns, name)}
	}
	return pod, nil
}

func hasContainer(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// findContainer returns the CRI ID of the container's latest attempt (previous: the one before).
// It asks the runtime by labels rather than trusting the status, which may lag a restart.
func (s *Server) findContainer(ctx context.Context, pod *v1.Pod, name string, previous bool) (string, error) {
	if !hasContainer(pod, name) {
		return "", &httpError{http.StatusBadRequest, fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name)}
	}
	resp, err := s.d.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{kubecontainer.LabelPodUID: string(pod.UID), kubecontainer.LabelContainerName: name},
	}})
	if err != nil {
		return "", fmt.Errorf("list containers: %w", err)
	}
	cs := resp.GetContainers()
	sort.Slice(cs, func(i, j int) bool { return cs[i].GetCreatedAt() > cs[j].GetCreatedAt() })
	want := 0
	if previous {
		want = 1
	}
	if len(cs) <= want {
		if previous {
			return "", &httpError{http.StatusBadRequest, fmt.Sprintf("previous terminated container %q in pod %q not found", name, pod.Name)}
		}
		return "", &httpError{http.StatusBadRequest, fmt.Sprintf("container %q in pod %q is waiting to start", name, pod.Name)}
	}
	return cs[want].GetId(), nil
}

// findSandbox returns the pod's ready sandbox.
func (s *Server) findSandbox(ctx context.Context, pod *v1.Pod) (string, error) {
	resp, err := s.d.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{kubecontainer.LabelPodUID: string(pod.UID)},
	}})
	if err != nil {
		return "", fmt.Errorf("list pod sandboxes: %w", err)
	}
	items := resp.GetItems()
	if len(items) == 0 {
		return "", &httpError{http.StatusBadRequest, fmt.Sprintf("pod %s/%s has no running sandbox", pod.Namespace, pod.Name)}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].GetCreatedAt() > items[j].GetCreatedAt() })
	return items[0].GetId(), nil
}
