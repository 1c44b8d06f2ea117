package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodelet/nodelet/agent"
	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// childAgentEnv makes the test binary run only an agent (with this JSON config), so a benchmark can
// measure the agent's memory as a process of its own.
const childAgentEnv = "NODELET_TEST_AGENT_CONFIG"

func runChildAgent(js string) int {
	var cfg agentconfig.Config
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	a, err := agent.New(cfg, agent.Deps{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	a.Run(ctx)
	return 0
}

// rssKB reads VmRSS of a process.
func rssKB(pid int) int { return statusKB(pid, "VmRSS:") }

// statusKB reads one kB field of /proc/PID/status; RssAnon is the process's own memory, without
// the binary's file pages that processes of the same executable share.
func statusKB(pid int, field string) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}

// helpersKB sums the RSS of the runtime daemon and every helper process naming its dir (shims, conmon).
func (r *criRuntime) helpersKB() int {
	total := rssKB(r.cmd.Process.Pid)
	for _, p := range testutil.ProcessesMentioning(r.dir) {
		var pid int
		fmt.Sscan(p, &pid)
		if pid != r.cmd.Process.Pid {
			total += rssKB(pid)
		}
	}
	return total
}

// BenchmarkMemory prints the agent's RSS (as its own process) and the runtime's with its helpers,
// idle and with 30 running pods. Run: go test -run '^$' -bench Memory -benchtime 1x ./agent/integration/
func BenchmarkMemory(b *testing.B) {
	for _, rt := range []struct {
		name  string
		start func(t testing.TB, dir, reg string) *criRuntime
	}{
		{"containerd", onContainerd},
		{"nodelet", onNodelet},
	} {
		b.Run(rt.name, func(b *testing.B) {
			e := newEnv(b, rt.start)
			js, _ := json.Marshal(e.cfg)
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), childAgentEnv+"="+string(js))
			logf, _ := os.Create(filepath.Join(b.TempDir(), "agent.log"))
			cmd.Stdout, cmd.Stderr = logf, logf
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() {
				cmd.Process.Signal(syscall.SIGTERM)
				cmd.Wait()
			}()
			settle := func() { time.Sleep(5 * time.Second) }
			settle()
			agentIdle, rtIdle := rssKB(cmd.Process.Pid), e.rt.helpersKB()
			b.ReportMetric(float64(statusKB(cmd.Process.Pid, "RssAnon:"))/1024, "agent-idle-anon-MB")
			const n = 30
			for i := 0; i < n; i++ {
				e.writePod(fmt.Sprintf("m%02d", i), "Always", e.reg+"/busybox:1", loop)
			}
			e.eventually("all running", func() bool { return e.countRunning() == n })
			settle()
			agentBusy, rtBusy := rssKB(cmd.Process.Pid), e.rt.helpersKB()
			b.ReportMetric(float64(statusKB(cmd.Process.Pid, "RssAnon:"))/1024, "agent-30pods-anon-MB")
			b.ReportMetric(float64(agentIdle)/1024, "agent-idle-MB")
			b.ReportMetric(float64(rtIdle)/1024, "runtime-idle-MB")
			b.ReportMetric(float64(agentBusy)/1024, "agent-30pods-MB")
			b.ReportMetric(float64(rtBusy)/1024, "runtime-30pods-MB")
			b.ReportMetric(float64(agentBusy+rtBusy-agentIdle-rtIdle)/n, "per-pod-KB")
			for i := 0; i < n; i++ {
				os.Remove(filepath.Join(e.manifests, fmt.Sprintf("m%02d.yaml", i)))
			}
			e.eventually("all removed", func() bool { return len(e.allSandboxes()) == 0 })
		})
	}
}
