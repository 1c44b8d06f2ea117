//go:build cluster

package integration

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/test/harness/crirt"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

func TestClusterAPIOnNodeletRuntime(t *testing.T) {
	clusterAPIScenario(t, newEnv(t, onNodelet), false)
}

// The same through containerd's streaming server; its pods share the host's network here.
func TestClusterAPIOnContainerd(t *testing.T) {
	clusterAPIScenario(t, newEnv(t, onContainerd), true)
}

// clusterAPIScenario runs `nodelet agent` as the node of a real control plane, with its HTTPS API
// on a free port, and drives kubectl logs, logs -f, exec, port-forward and the node proxy's
// /stats/summary through the apiserver, which authenticates to the agent with its kubelet client
// certificate. Anonymous requests get 401, a user RBAC knows nothing of gets 403.
func clusterAPIScenario(t *testing.T, e *env, hostNetwork bool) {
	testutil.Require(t, "curl")
	cpDir := filepath.Join(t.TempDir(), "cp")
	os.MkdirAll(cpDir, 0o755)
	admin, p := startControlPlanePKI(t, cpDir)
	client := kubeClient(t, admin)
	ctx := context.Background()
	nodeIP, port := e.startServingNode(t, admin, p, cpDir, client)
	p.issue(t, "nobody", "nobody", nil, false)
	p.issue(t, "apiserver-as-user", "kube-apiserver-kubelet-client", nil, false)

	grace := int64(2)
	// A host-network pod's server takes a free port of the host's loopback.
	httpPort := 8080
	if hostNetwork {
		httpPort = freePort(t)
	}
	script := "trap 'exit 0' TERM; mkdir -p /tmp/www; echo hello-through-port-forward > /tmp/www/index.html; " +
		"/bin/busybox httpd -p 127.0.0.1:" + strconv.Itoa(httpPort) + " -h /tmp/www; i=0; while true; do echo tick-$i; i=$((i+1)); sleep 0.2; done"
	if _, err := client.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "talker"},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace, HostNetwork: hostNetwork, Containers: []v1.Container{{
			Name: "app", Image: e.reg + "/busybox:1", Command: []string{"/bin/sh", "-c", script}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("pod running", func() bool {
		pod, err := client.CoreV1().Pods("default").Get(ctx, "talker", metav1.GetOptions{})
		return err == nil && pod.Spec.NodeName == "e2e" && pod.Status.Phase == v1.PodRunning
	})
	kubectl := func(args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, filepath.Join(kubeBinDir(), "kubectl"), append([]string{"--kubeconfig", admin}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	t.Run("logs", func(t *testing.T) {
		eventually(t, "kubectl logs shows the app's output", func() bool {
			out, _ := kubectl("logs", "talker")
			return strings.Contains(out, "tick-0\n")
		})
	})

	t.Run("logs -f", func(t *testing.T) {
		lines := followLogs(t, admin, 3)
		// With --tail=1 the first line was there before; the others arrived while following.
		if lines[0] == lines[1] || lines[1] == lines[2] {
			t.Fatalf("followed lines %q", lines)
		}
	})

	t.Run("exec", func(t *testing.T) {
		out, err := kubectl("exec", "talker", "--", "/bin/sh", "-c", "echo exec-$((6*7)); exit 3")
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || !strings.Contains(out, "exec-42") {
			t.Fatalf("kubectl exec: %v\n%s", err, out)
		}
		cmd := exec.Command(filepath.Join(kubeBinDir(), "kubectl"), "--kubeconfig", admin, "exec", "-i", "talker", "--", "/bin/cat")
		cmd.Stdin = strings.NewReader("through-stdin\n")
		b, err := cmd.CombinedOutput()
		if err != nil || string(b) != "through-stdin\n" {
			t.Fatalf("kubectl exec -i: %v %q", err, b)
		}
	})

	t.Run("port-forward", func(t *testing.T) {
		// kubectl picks and binds the local port itself (":remote") and says which: a port picked
		// here beforehand could be taken by another process first.
		cmd := exec.Command(filepath.Join(kubeBinDir(), "kubectl"), "--kubeconfig", admin, "port-forward",
			"--address", "127.0.0.1", "pod/talker", fmt.Sprintf(":%d", httpPort))
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = cmd.Stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		ready := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			var seen []string
			for sc.Scan() {
				seen = append(seen, sc.Text())
				if from, ok := strings.CutPrefix(sc.Text(), "Forwarding from 127.0.0.1:"); ok {
					local, _, _ := strings.Cut(from, " ")
					ready <- local
					io.Copy(io.Discard, stdout)
					return
				}
			}
			t.Logf("kubectl port-forward said: %s", strings.Join(seen, "\n"))
			close(ready)
		}()
		local, ok := <-ready
		if !ok {
			t.Fatal("kubectl port-forward ended before forwarding")
		}
		var body string
		eventually(t, "a page through the forwarded port", func() bool {
			resp, err := http.Get("http://127.0.0.1:" + local + "/")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
			return resp.StatusCode == 200
		})
		if body != "hello-through-port-forward\n" {
			t.Fatalf("body %q", body)
		}
	})

	t.Run("stats/summary through the node proxy", func(t *testing.T) {
		var s statsapi.Summary
		var out string
		var err error
		defer func() {
			if t.Failed() {
				t.Logf("last answer: %v\n%s", err, tail(out, 30))
			}
		}()
		eventually(t, "the pod in the summary", func() bool {
			out, err = kubectl("get", "--raw", "/api/v1/nodes/e2e/proxy/stats/summary")
			if err != nil || json.Unmarshal([]byte(out), &s) != nil {
				return false
			}
			for _, ps := range s.Pods {
				if ps.PodRef.Name == "talker" && len(ps.Containers) == 1 {
					return true
				}
			}
			return false
		})
		if s.Node.NodeName != "e2e" || s.Node.CPU == nil || s.Node.Memory == nil {
			t.Fatalf("node stats %+v", s.Node)
		}
	})

	t.Run("metrics/cadvisor and metrics/probes through the node proxy", func(t *testing.T) {
		// The container's cgroup, found below its pod's and named through CRI, on this runtime.
		want := []string{`container_memory_working_set_bytes{container="app",`, `namespace="default",pod="talker"}`,
			`container_cpu_usage_seconds_total{container="app",cpu="total",`, "machine_cpu_cores{"}
		var out string
		var err error
		defer func() {
			if t.Failed() {
				t.Logf("last answer: %v\n%s", err, tail(out, 30))
			}
		}()
		eventually(t, "the talker's container in /metrics/cadvisor", func() bool {
			out, err = kubectl("get", "--raw", "/api/v1/nodes/e2e/proxy/metrics/cadvisor")
			for _, w := range want {
				if err != nil || !strings.Contains(out, w) {
					return false
				}
			}
			return true
		})
		if out, err := kubectl("get", "--raw", "/api/v1/nodes/e2e/proxy/metrics/probes"); err != nil || !strings.Contains(out, "process_start_time_seconds") {
			t.Errorf("/metrics/probes: %v %s", err, tail(out, 10))
		}
	})

	t.Run("configz and logs through the node proxy", func(t *testing.T) {
		out, err := kubectl("get", "--raw", "/api/v1/nodes/e2e/proxy/configz")
		var cz struct {
			KubeletConfig kubeletv1beta1.KubeletConfiguration `json:"kubeletconfig"`
		}
		if err != nil || json.Unmarshal([]byte(out), &cz) != nil {
			t.Fatalf("/configz: %v %s", err, tail(out, 10))
		}
		if kc := cz.KubeletConfig; kc.Port != int32(port) || kc.Address != nodeIP || kc.MaxPods != 110 ||
			kc.Authentication.X509.ClientCAFile != filepath.Join(cpDir, "ca.crt") {
			t.Errorf("/configz does not show the running configuration: %s", tail(out, 10))
		}
		if out, err := kubectl("get", "--raw", "/api/v1/nodes/e2e/proxy/logs/"); err != nil || !strings.Contains(out, "<pre>") {
			t.Errorf("/logs/: %v %s", err, tail(out, 10))
		}
	})

	t.Run("anonymous gets 401", func(t *testing.T) {
		base := "https://" + net.JoinHostPort(nodeIP, strconv.Itoa(port))
		for _, args := range [][]string{
			{base + "/containerLogs/default/talker/app"},
			{"-X", "POST", base + "/exec/default/talker/app?command=ls&output=1"},
			{base + "/pods"},
		} {
			if code := curl(t, append([]string{"-k"}, args...)...); code != "401" {
				t.Errorf("curl -k %v: %s, want 401", args, code)
			}
		}
	})

	t.Run("a user without RBAC rights gets 403", func(t *testing.T) {
		base := "https://" + net.JoinHostPort(nodeIP, strconv.Itoa(port))
		creds := func(name string) []string {
			// --cacert without -k: the serving certificate checks out for the node IP.
			return []string{"--cacert", filepath.Join(cpDir, "ca.crt"),
				"--cert", filepath.Join(cpDir, name+".crt"), "--key", filepath.Join(cpDir, name+".key")}
		}
		for _, args := range [][]string{
			{base + "/containerLogs/default/talker/app"},
			{"-X", "POST", base + "/exec/default/talker/app?command=ls&output=1"},
			{base + "/stats/summary"},
			{base + "/logs/"},
			{base + "/configz"},
		} {
			if code := curl(t, append(creds("nobody"), args...)...); code != "403" {
				t.Errorf("curl as nobody %v: %s, want 403", args, code)
			}
		}
		// The same request with the apiserver's identity, which RBAC allows.
		if code := curl(t, append(creds("apiserver-as-user"), base+"/containerLogs/default/talker/app?tailLines=1")...); code != "200" {
			t.Errorf("curl as kube-apiserver-kubelet-client: %s, want 200", code)
		}
	})
}

// addLoopbackIP adds a free address of 192.0.2.0/24 (TEST-NET-1, never routed) to lo and removes
// it at cleanup.
func addLoopbackIP(t *testing.T) string {
	t.Helper()
	testutil.Require(t, "ip")
	for i := 0; i < 20; i++ {
		ip := fmt.Sprintf("192.0.2.%d", 2+(os.Getpid()+i)%250)
		if err := exec.Command("ip", "addr", "add", ip+"/32", "dev", "lo").Run(); err != nil {
			continue // taken, perhaps by a test running beside this one
		}
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "addr", "del", ip+"/32", "dev", "lo").CombinedOutput(); err != nil {
				t.Errorf("ip addr del %s: %v %s", ip, err, out)
			}
		})
		return ip
	}
	t.Fatal("no free address in 192.0.2.0/24 for lo")
	return ""
}

// issueServing writes name.crt and name.key, a serving certificate of the CA for ip.
func (p *pki) issueServing(t testing.TB, name, cn, ip string) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP(ip)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	writePEM(t, filepath.Join(p.dir, name+".crt"), "CERTIFICATE", der)
	writePEM(t, filepath.Join(p.dir, name+".key"), "EC PRIVATE KEY", kb)
}

// eventually waits for cond, failing t (a subtest's own) after 90 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// curl runs curl with args and returns the HTTP status code it got.
func curl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("curl", append([]string{"-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "30"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl %v: %v %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// followLogs runs `kubectl logs -f --tail=1 talker` until it printed n lines.
func followLogs(t *testing.T, admin string, n int) []string {
	t.Helper()
	cmd := exec.Command(filepath.Join(kubeBinDir(), "kubectl"), "--kubeconfig", admin, "logs", "-f", "--tail=1", "talker")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	got := make(chan []string, 1)
	go func() {
		var lines []string
		sc := bufio.NewScanner(stdout)
		for len(lines) < n && sc.Scan() {
			lines = append(lines, sc.Text())
		}
		got <- lines
	}()
	select {
	case lines := <-got:
		if len(lines) < n {
			t.Fatalf("kubectl logs -f ended after %q", lines)
		}
		return lines
	case <-time.After(90 * time.Second):
		t.Fatal("kubectl logs -f printed nothing new for 90 s")
	}
	return nil
}

// startAgentProcess runs `nodelet agent` on e's runtime, manifests and folders, with extra flags;
// it is stopped at cleanup, after which nothing may listen on port.
func (e *env) startAgentProcess(ip string, port int, extra ...string) {
	e.t.Helper()
	args := append([]string{"agent", "--container-runtime-endpoint", e.rt.Endpoint, "--pod-manifest-path", e.manifests,
		"--root-dir", e.cfg.RootDir, "--pod-logs-dir", e.cfg.Kubelet.PodLogsDir, "--hostname-override", e.cfg.HostnameOverride,
		"--healthz-port", "0", "--cgroup-root", e.cfg.PodsCgroup, "--api-socket", ""}, extra...)
	logPath := filepath.Join(filepath.Dir(e.manifests), "agent.log")
	logf, err := os.Create(logPath)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(crirt.Binary(e.t), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			e.t.Error("the agent did not stop on SIGTERM")
		}
		logf.Close()
		if c, err := net.Dial("tcp", net.JoinHostPort(ip, strconv.Itoa(port))); err == nil {
			c.Close()
			e.t.Errorf("something still listens on the agent's port %d", port)
		}
		if e.t.Failed() {
			b, _ := os.ReadFile(logPath)
			e.t.Logf("agent log:\n%s", tail(string(b), 60))
		}
	})
}

// startServingNode starts the agent as a process serving its API over HTTPS as node e2e, and
// waits for the Node to be Ready with that port and address. The apiserver's node proxy refuses
// loopback node addresses ("address not allowed"), so the node's InternalIP is a documentation
// address added to lo for the test: still loopback traffic. The agent's serving certificate is the
// cluster CA's, for the node IP, so the apiserver verifies it; the apiserver's kubelet client may
// use the node's API (system:kubelet-api-admin).
func (e *env) startServingNode(t *testing.T, admin string, p *pki, cpDir string, client kubernetes.Interface, extra ...string) (string, int) {
	t.Helper()
	ctx := context.Background()
	nodeIP := addLoopbackIP(t)
	p.issueServing(t, "nodelet-serving", "e2e", nodeIP)
	bindKubeletAPIAdmin(t, client)
	port := freePort(t)
	e.startAgentProcess(nodeIP, port, append([]string{"--kubeconfig", admin, "--node-ip", nodeIP,
		"--address", nodeIP, "--port", strconv.Itoa(port),
		"--tls-cert-file", filepath.Join(cpDir, "nodelet-serving.crt"), "--tls-private-key-file", filepath.Join(cpDir, "nodelet-serving.key"),
		"--client-ca-file", filepath.Join(cpDir, "ca.crt")}, extra...)...)
	e.eventually("node Ready with its API's port and address", func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, "e2e", metav1.GetOptions{})
		if err != nil || n.Status.DaemonEndpoints.KubeletEndpoint.Port != int32(port) {
			return false
		}
		ip := false
		for _, a := range n.Status.Addresses {
			ip = ip || (a.Type == v1.NodeInternalIP && a.Address == nodeIP)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
				return ip
			}
		}
		return false
	})
	return nodeIP, port
}

// bindKubeletAPIAdmin lets the apiserver's kubelet client (kube-apiserver-kubelet-client) use the
// node's API, as kubeadm binds it.
func bindKubeletAPIAdmin(t testing.TB, client kubernetes.Interface) {
	t.Helper()
	if _, err := client.RbacV1().ClusterRoleBindings().Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-kubelet-client"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "kube-apiserver-kubelet-client"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
