package server_test

import (
	"strings"
	"testing"
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
