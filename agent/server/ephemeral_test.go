package server_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/server/apiclient"
)

// kubectl debug -it attaches to the debug container, and exec and logs name it like any other.
func TestExecAttachLogsReachAnEphemeralContainer(t *testing.T) {
	f, _, c := setup(t)
	pod := f.AddPod("default", "web", "nginx")
	f.Pods.Update("default", "web", func(p *v1.Pod) {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{TargetContainerName: "nginx",
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: "busybox", Stdin: true, TTY: true}})
	})
	id := f.StartContainer(pod, "debugger")
	f.Runtime.WriteLog(id, "stdout F / # ps")
	ctx := context.Background()

	var out bytes.Buffer
	if err := c.Exec(ctx, "default", "web", "debugger", []string{"echo", "hi"}, apiclient.StreamOptions{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "hi\n" {
		t.Fatalf("exec stdout %q", out.String())
	}
	out.Reset()
	if err := c.Attach(ctx, "default", "web", "debugger", apiclient.StreamOptions{Stdin: strings.NewReader("ps"), Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "ps" {
		t.Fatalf("attach %q", out.String())
	}
	if code, body := get(t, c, "/containerLogs/default/web/debugger"); code != 200 || body != "/ # ps\n" {
		t.Fatalf("logs %d %q", code, body)
	}
}
