package cri_test

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// BenchmarkCRILifecycle measures, over 20 runs each, RunPodSandbox, CreateContainer+StartContainer
// and StopContainer+RemoveContainer through the CRI socket, and the RSS of the process serving CRI
// (this test binary: the server plus a gRPC client) idle and with 20 running containers, with the
// conmon monitors counted apart. Run it with:
//
//	go test -run '^$' -bench CRILifecycle -benchtime 1x ./runtime/cri/
func BenchmarkCRILifecycle(b *testing.B) {
	for _, handler := range []string{"runc", "crun", "runsc"} {
		b.Run(handler, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchLifecycle(b, handler)
			}
		})
	}
}

func benchLifecycle(b *testing.B, handler string) {
	const runs = 20
	e := runtimetest.Start(b)
	runtime.GC()
	debug.FreeOSMemory()
	idle := rssKB(os.Getpid())

	var runp, createStart, stopRemove []time.Duration
	var pods []string
	for i := 0; i < runs; i++ {
		pod := e.PodWithLogs(fmt.Sprintf("bench-%d", i))
		t0 := time.Now()
		sb := e.RunPod(pod, handler)
		runp = append(runp, time.Since(t0))
		pods = append(pods, sb)

		cfg := runtimetest.ContainerConfig("c", "sleep", "100000")
		t0 = time.Now()
		e.RunContainer(sb, pod, cfg)
		createStart = append(createStart, time.Since(t0))
	}
	runtime.GC()
	debug.FreeOSMemory()
	busy := rssKB(os.Getpid())
	var conmonKB, conmonPssKB int
	list, err := e.Runtime.ListContainers(e.Ctx(), &runtimeapi.ListContainersRequest{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range list.Containers {
		resp, err := e.Runtime.ContainerStatus(e.Ctx(), &runtimeapi.ContainerStatusRequest{ContainerId: c.Id, Verbose: true})
		if err != nil {
			b.Fatal(err)
		}
		var info struct {
			ConmonPid int `json:"conmonPid"`
		}
		_ = json.Unmarshal([]byte(resp.Info["info"]), &info)
		conmonKB += rssKB(info.ConmonPid)
		conmonPssKB += pssKB(info.ConmonPid)
	}
	for _, c := range list.Containers {
		t0 := time.Now()
		if _, err := e.Runtime.StopContainer(e.Ctx(), &runtimeapi.StopContainerRequest{ContainerId: c.Id, Timeout: 10}); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Runtime.RemoveContainer(e.Ctx(), &runtimeapi.RemoveContainerRequest{ContainerId: c.Id}); err != nil {
			b.Fatal(err)
		}
		stopRemove = append(stopRemove, time.Since(t0))
	}
	report := func(name string, d []time.Duration) {
		p50, p90 := percentiles(d)
		b.ReportMetric(p50, name+"-p50-ms")
		b.ReportMetric(p90, name+"-p90-ms")
		fmt.Printf("%-6s %-22s median %7.1f ms  p90 %7.1f ms  (n=%d)\n", handler, name, p50, p90, len(d))
	}
	report("RunPodSandbox", runp)
	report("Create+StartContainer", createStart)
	report("Stop+RemoveContainer", stopRemove)
	b.ReportMetric(float64(idle)/1024, "rss-idle-MB")
	b.ReportMetric(float64(busy)/1024, "rss-20ctr-MB")
	b.ReportMetric(float64(conmonKB)/1024/float64(len(list.Containers)), "conmon-MB/ctr")
	b.ReportMetric(float64(conmonPssKB)/1024/float64(len(list.Containers)), "conmon-PSS-MB/ctr")
	fmt.Printf("%-6s RSS idle %.1f MB, with %d running containers %.1f MB; conmon %.2f MB RSS, %.2f MB PSS each\n",
		handler, float64(idle)/1024, len(list.Containers), float64(busy)/1024,
		float64(conmonKB)/1024/float64(len(list.Containers)), float64(conmonPssKB)/1024/float64(len(list.Containers)))
}

func percentiles(d []time.Duration) (p50, p90 float64) {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	return ms(s[len(s)/2]), ms(s[(len(s)*9+9)/10-1])
}

func rssKB(pid int) int {
	if pid <= 0 {
		return 0
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}

// pssKB is the process's proportional share of its memory: shared library pages count once
// across the conmons rather than once each.
func pssKB(pid int) int {
	if pid <= 0 {
		return 0
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}
