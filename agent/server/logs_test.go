package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/test/harness/apitest"
)

// A container that exits mid-line leaves a partial entry with no full one after it; the API
// prints it, with or without --tail, as the kubelet does.
func TestContainerLogsLastLineWithoutNewline(t *testing.T) {
	f, _, c := setup(t)
	pod := f.AddPod("default", "web", "nginx")
	id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "nodelet://")
	f.Runtime.WriteLog(id, "stdout F one", "stdout P bye")
	f.Runtime.Exit(id)
	for query, want := range map[string]string{"": "one\nbye", "?tailLines=1": "bye", "?follow=true": "one\nbye"} {
		if code, body := get(t, c, "/containerLogs/default/web/nginx"+query); code != 200 || body != want {
			t.Errorf("%s: %d %q, want %q", query, code, body, want)
		}
	}
}

// The log body is streamed with chunked transfer, not buffered with a Content-Length: the
// apiserver's WebSocket relay of `kubectl logs` cuts a buffered answer short.
func TestContainerLogsStreamed(t *testing.T) {
	f := apitest.NewFixture(t)
	pod := f.AddPod("default", "web", "nginx")
	id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "nodelet://")
	f.Runtime.WriteLog(id, "stdout F one", "stderr F two")
	srv := httptest.NewServer(f.Server(nil))
	defer srv.Close()
	for _, query := range []string{"", "?tailLines=1"} {
		resp, err := http.Get(srv.URL + "/containerLogs/default/web/nginx" + query)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%q: %d %q %v", query, resp.StatusCode, body, err)
		}
		if resp.ContentLength != -1 || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
			t.Errorf("%q: Content-Length %d, Transfer-Encoding %v; want a chunked stream", query, resp.ContentLength, resp.TransferEncoding)
		}
		if want := map[string]string{"": "one\ntwo\n", "?tailLines=1": "two\n"}[query]; string(body) != want {
			t.Errorf("%q: body %q, want %q", query, body, want)
		}
	}
}

// While a container waits in CrashLoopBackOff its newest attempt has exited and no new one exists
// yet: --previous is that attempt (status' lastState), even when GC left no older one.
func TestContainerLogsPreviousInCrashLoopBackOff(t *testing.T) {
	f, _, c := setup(t)
	pod := f.AddPod("default", "web", "nginx")
	first := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "nodelet://")
	f.Runtime.WriteLog(first, "stdout F first run")
	f.Runtime.Exit(first)
	crashLoop := func(id string) func(*v1.Pod) {
		return func(p *v1.Pod) {
			st := &p.Status.ContainerStatuses[0]
			st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
			st.LastTerminationState = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, ContainerID: "nodelet://" + id}}
			st.RestartCount++
		}
	}
	f.Pods.Update("default", "web", crashLoop(first))
	for query, want := range map[string]string{"?previous=true": "first run\n", "": "first run\n"} {
		if code, body := get(t, c, "/containerLogs/default/web/nginx"+query); code != 200 || body != want {
			t.Errorf("one attempt, %q: %d %q, want %q", query, code, body, want)
		}
	}

	pod, _ = f.Pods.Pod("default", "web")
	second := f.StartContainer(pod, "nginx")
	f.Runtime.WriteLog(second, "stdout F second run")
	f.Runtime.Exit(second)
	f.Pods.Update("default", "web", crashLoop(second))
	if code, body := get(t, c, "/containerLogs/default/web/nginx?previous=true"); code != 200 || body != "second run\n" {
		t.Errorf("two attempts: %d %q, want the newest", code, body)
	}

	// A container that will not restart is its own current instance; previous is the one before.
	f.Pods.Update("default", "web", func(p *v1.Pod) {
		p.Status.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}
	})
	if code, body := get(t, c, "/containerLogs/default/web/nginx?previous=true"); code != 200 || body != "first run\n" {
		t.Errorf("terminated: %d %q, want the attempt before", code, body)
	}
}
