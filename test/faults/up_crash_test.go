package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// upNode is the node name of the `nodelet up` under test; static pods are named POD-upNode.
const upNode = "faults-node"

// maxManifests bounds how many pods the manifest churn keeps at once.
const maxManifests = 8

// manifests is the folder `nodelet up` watches and what the test wrote into it.
type manifests struct {
	dir     string
	present map[string]string // pod name → its container's sleep marker
	next    int
}

// add writes a manifest for a new pod whose container sleeps on a marker of its own.
func (m *manifests) add(t *testing.T) {
	t.Helper()
	m.next++
	name, mark := fmt.Sprintf("p%d", m.next), fmt.Sprintf("%d", 770000+m.next)
	pod := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: main, image: "busybox:faults", imagePullPolicy: IfNotPresent, command: [sleep, "%s"]}
`, name, mark)
	// Written aside and renamed in, as an editor or a config tool would, so no half file is read.
	tmp := filepath.Join(m.dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, name+".yaml")); err != nil {
		t.Fatal(err)
	}
	m.present[name] = mark
}

// remove deletes the manifest of one present pod.
func (m *manifests) remove(t *testing.T, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(m.dir, name+".yaml")); err != nil {
		t.Fatal(err)
	}
	delete(m.present, name)
}

// churn adds and removes manifests n times at moments drawn from rng.
func (m *manifests) churn(t *testing.T, rng *rand.Rand, n int) {
	t.Helper()
	for range n {
		if len(m.present) > 0 && (len(m.present) >= maxManifests || rng.IntN(3) == 0) {
			names := m.names()
			m.remove(t, names[rng.IntN(len(names))])
		} else {
			m.add(t)
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
	}
}

func (m *manifests) names() []string {
	var out []string
	for n := range m.present {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TestUpSIGKILLDuringManifestChurn kills `nodelet up` while manifests come and go, restarts it on
// the same dirs and checks that each manifest's pod runs exactly once and deleted ones are gone;
// then removes every manifest and checks that nothing is left. NODELET_FAULT_ROUNDS crashes in a row.
func TestUpSIGKILLDuringManifestChurn(t *testing.T) {
	rounds := envInt(t, "NODELET_FAULT_ROUNDS", 3)
	m := &manifests{dir: t.TempDir(), present: map[string]string{}}
	d := newDaemon(t, "up", "nlfault1", "10.254.31.0/24", "--manifests", m.dir, "--api-socket", "",
		"--hostname-override", upNode, "--healthz-port", "0", "--pod-logs-dir", filepath.Join(t.TempDir(), "logs"))
	d.args = append(d.args, "--cgroup-root", d.cgroup)
	d.start()
	// The warm-up pod makes the dirs a node makes on first use, and pulls the image.
	m.add(t)
	d.converge(t, m)
	m.remove(t, m.names()[0])
	d.converge(t, m)
	base := d.settled(t)
	t.Logf("baseline: %s", base)
	seed := faultSeed(t)
	t.Logf("seed %d (NODELET_FAULT_SEED)", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := range rounds {
		before := rng.IntN(12) + 1
		m.churn(t, rng, before)
		d.kill()
		// The manifests keep changing while no agent runs.
		m.churn(t, rng, rng.IntN(4))
		d.restart()
		d.converge(t, m)
		t.Logf("round %d: killed after %d manifest changes; %d pods converged", round, before, len(m.present))
		for _, n := range m.names() {
			m.remove(t, n)
		}
		d.converge(t, m)
		now, leaks := d.waitNoLeaks(base)
		t.Logf("round %d: after removing every manifest: %s", round, now)
		for _, s := range leaks {
			t.Errorf("round %d: %s", round, s)
		}
		if t.Failed() {
			return
		}
	}
}

// converge waits until the runtime runs exactly the manifests' pods, each once, and nothing else,
// failing the test with the difference when the limit, a bound for a hang, is reached. A pod seen
// running twice at any moment fails the test at once.
func (d *daemon) converge(t *testing.T, m *manifests) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		diff, twice := d.podDiff(m)
		if len(twice) > 0 {
			t.Fatalf("pods running twice: %s", strings.Join(twice, "; "))
		}
		if len(diff) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node never ran what the manifests say: %s", strings.Join(diff, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// podDiff compares what runs with what the manifests want: differences, and pods running twice.
func (d *daemon) podDiff(m *manifests) (diff, twice []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sbs, err := d.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return []string{fmt.Sprintf("list sandboxes: %v", err)}, nil
	}
	ctrs, err := d.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return []string{fmt.Sprintf("list containers: %v", err)}, nil
	}
	ready := map[string]int{} // pod name → ready sandboxes
	for _, sb := range sbs.Items {
		name := strings.TrimSuffix(sb.GetMetadata().GetName(), "-"+upNode)
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready[name]++
		}
		if _, want := m.present[name]; !want {
			diff = append(diff, fmt.Sprintf("sandbox of deleted pod %s (%v)", name, sb.State))
		}
	}
	running := map[string]int{} // pod name → running containers
	for _, c := range ctrs.Containers {
		name := strings.TrimSuffix(c.GetLabels()["io.kubernetes.pod.name"], "-"+upNode)
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			running[name]++
		}
		if _, want := m.present[name]; !want {
			diff = append(diff, fmt.Sprintf("container of deleted pod %s (%v)", name, c.State))
		}
	}
	procs := sleepers()
	for name, mark := range m.present {
		switch {
		case ready[name] > 1 || running[name] > 1 || len(procs[mark]) > 1:
			twice = append(twice, fmt.Sprintf("%s: %d ready sandboxes, %d running containers, pids %v", name, ready[name], running[name], procs[mark]))
		case ready[name] == 0 || running[name] == 0 || len(procs[mark]) == 0:
			diff = append(diff, fmt.Sprintf("%s not running (%d ready sandboxes, %d running containers, pids %v)", name, ready[name], running[name], procs[mark]))
		}
	}
	for mark, pids := range procs {
		if strings.HasPrefix(mark, "77") && !slices.Contains(mapValues(m.present), mark) {
			diff = append(diff, fmt.Sprintf("sleep %s of a deleted pod runs: pids %v", mark, pids))
		}
	}
	return diff, twice
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
