package cri_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// criLine is one line of the CRI log format: time, stream, P(artial)/F(ull) tag, content.
var criLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+(Z|[+-]\d\d:\d\d) (stdout|stderr) [PF] .*$`)

func TestContainerLifecycle(t *testing.T) {
	for _, handler := range []string{"runc", "crun", "runsc"} {
		t.Run(handler, func(t *testing.T) {
			e := runtimetest.Start(t)
			pod := e.PodWithLogs("life-" + handler)
			sb := e.RunPod(pod, handler)

			cfg := runtimetest.ContainerConfig("c1", "sh", "-c", "echo out; echo err >&2; exit 3")
			id := e.CreateContainer(sb, pod, cfg)
			if st := e.Status(id); st.State != runtimeapi.ContainerState_CONTAINER_CREATED || st.CreatedAt == 0 {
				t.Fatalf("after create: %v", st)
			}
			if _, err := e.Runtime.StartContainer(e.Ctx(), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
				t.Fatal(err)
			}
			st := e.WaitContainerState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
			if st.ExitCode != 3 || st.Reason != "Error" || st.StartedAt == 0 || st.FinishedAt < st.StartedAt {
				t.Fatalf("exited status: %+v", st)
			}
			if st.ImageRef == "" || st.Image.GetImage() != runtimetest.Image || st.Labels["container"] != "c1" {
				t.Fatalf("status image/labels: %+v", st)
			}
			logPath := filepath.Join(pod.LogDirectory, "c1.log")
			if st.LogPath != logPath {
				t.Fatalf("log path %q, want %q", st.LogPath, logPath)
			}
			log := e.WaitLog(logPath, "err")
			for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
				if !criLine.MatchString(line) {
					t.Errorf("not a CRI log line: %q", line)
				}
			}
			if !strings.Contains(log, " stdout F out") || !strings.Contains(log, " stderr F err") {
				t.Errorf("log lacks the output:\n%s", log)
			}

			ok := runtimetest.ContainerConfig("c2", "true")
			id2 := e.RunContainer(sb, pod, ok)
			if st := e.WaitContainerState(id2, runtimeapi.ContainerState_CONTAINER_EXITED); st.ExitCode != 0 || st.Reason != "Completed" {
				t.Fatalf("c2: %+v", st)
			}

			list, err := e.Runtime.ListContainers(e.Ctx(), &runtimeapi.ListContainersRequest{})
			if err != nil || len(list.Containers) != 2 {
				t.Fatalf("list: %v %v", list, err)
			}
			for _, c := range []string{id, id2} {
				if _, err := e.Runtime.StopContainer(e.Ctx(), &runtimeapi.StopContainerRequest{ContainerId: c, Timeout: 1}); err != nil {
					t.Fatalf("stop exited: %v", err)
				}
				for i := 0; i < 2; i++ {
					if _, err := e.Runtime.RemoveContainer(e.Ctx(), &runtimeapi.RemoveContainerRequest{ContainerId: c}); err != nil {
						t.Fatalf("remove #%d: %v", i, err)
					}
				}
			}
			list, err = e.Runtime.ListContainers(e.Ctx(), &runtimeapi.ListContainersRequest{})
			if err != nil || len(list.Containers) != 0 {
				t.Fatalf("list after remove: %v %v", list, err)
			}
			// Nothing of them is left: records, bundles, exit files, rootfs, runtime state.
			// (Mounts, processes and cgroups are checked by runtimetest at cleanup.)
			for _, dir := range []string{
				filepath.Join(e.Config.Root, "containers"), filepath.Join(e.Config.State, "exits"),
				filepath.Join(e.Dir, "overlays"), e.Config.Handlers[handler].Root,
			} {
				ents, _ := os.ReadDir(dir)
				for _, ent := range ents {
					if strings.Contains(ent.Name(), id) || strings.Contains(ent.Name(), id2) {
						t.Errorf("left behind in %s: %s", dir, ent.Name())
					}
				}
			}
		})
	}
}
