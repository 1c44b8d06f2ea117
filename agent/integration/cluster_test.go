//go:build cluster

// The cluster test joins the agent to a real control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) started on loopback from binaries built by
// hack/kube/build.sh. It takes a minute and needs a warm build cache (11–12 minutes cold), so it is
// built only with the "cluster" tag, on demand:
//
//	hack/kube/build.sh && go test -tags cluster -run Cluster -v ./agent/integration/
package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

func kubeBinDir() string {
	if d := os.Getenv("KUBE_BIN_DIR"); d != "" {
		return d
	}
	c := os.Getenv("NODELET_CACHE")
	if c == "" {
		c = "/var/cache/nodelet"
	}
	v := os.Getenv("KUBE_VERSION")
	if v == "" {
		v = "v1.34.4"
	}
	return filepath.Join(c, "kube-"+v, "bin")
}

type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newPKI(t testing.TB, dir string) *pki {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nodelet-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	writePEM(t, filepath.Join(dir, "ca.crt"), "CERTIFICATE", der)
	return &pki{dir: dir, caCert: cert, caKey: key}
}

// issue writes name.crt and name.key signed by the CA.
func (p *pki) issue(t testing.TB, name, cn string, orgs []string, server bool) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}
		tmpl.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	writePEM(t, filepath.Join(p.dir, name+".crt"), "CERTIFICATE", der)
	writePEM(t, filepath.Join(p.dir, name+".key"), "EC PRIVATE KEY", kb)
}

func (p *pki) kubeconfig(t testing.TB, name, server string) string {
	path := filepath.Join(p.dir, name+".kubeconfig")
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, certificate-authority: %q}
users:
- name: %[3]s
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: test
  context: {cluster: test, user: %[3]s}
current-context: test
`, server, filepath.Join(p.dir, "ca.crt"), name, filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key"))
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func freePort(t testing.TB) int { return testutil.FreePort(t) }

// startProc runs a control plane binary with its log in dir; it is killed at cleanup. The
// returned channel closes when the process exits.
func startProc(t testing.TB, dir, bin string, args ...string) <-chan struct{} {
	t.Helper()
	path := filepath.Join(kubeBinDir(), bin)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s missing: build it with hack/kube/build.sh (about 12 minutes cold), or set KUBE_BIN_DIR", path)
	}
	logf, err := os.Create(filepath.Join(dir, bin+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done: // exited and reaped: its process group ID may belong to someone else now
		default:
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, bin+".log"))
			t.Logf("%s log:\n%s", bin, tail(string(b), 20))
		}
	})
	return done
}

// startOnFreePorts starts a component on ports picked for it. A port picked in advance can be
// taken by another process before the component binds it; the component then exits, and it is
// started again on new ports (three tries). ready tells the component answers on its ports.
func startOnFreePorts(t testing.TB, nports int, start func(ports []int) <-chan struct{}, ready func(ports []int) bool) []int {
	t.Helper()
	for try := 1; ; try++ {
		ports := make([]int, nports)
		for i := range ports {
			ports[i] = freePort(t)
		}
		exited := start(ports)
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if ready(ports) {
				return ports
			}
			select {
			case <-exited:
			default:
				if time.Now().Before(deadline) {
					continue
				}
				t.Fatalf("a control plane component did not answer on ports %v within 90 s", ports)
			}
			break
		}
		if try == 3 {
			t.Fatalf("a control plane component exited before it answered, three times (ports %v last)", ports)
		}
		t.Logf("a control plane component exited before it answered on ports %v (taken?): starting it on new ports", ports)
	}
}

// startControlPlane starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler on
// loopback and returns an admin kubeconfig.
// joinLoopbackCluster starts a control plane of the test's own and points the agent's config at
// it as node e2e on 127.0.0.1, reporting its status every second; the caller starts the agent.
func (e *env) joinLoopbackCluster(t testing.TB) kubernetes.Interface {
	cpDir := filepath.Join(t.TempDir(), "cp")
	os.MkdirAll(cpDir, 0o755)
	admin := startControlPlane(t, cpDir)
	e.cfg.Kubeconfig = admin
	e.cfg.NodeIPs = []string{"127.0.0.1"}
	e.cfg.Kubelet.NodeStatusUpdateFrequency.Duration, e.cfg.Kubelet.NodeStatusReportFrequency.Duration = time.Second, time.Second
	return kubeClient(t, admin)
}

func startControlPlane(t testing.TB, dir string) string {
	admin, _ := startControlPlanePKI(t, dir)
	return admin
}

// startControlPlanePKI is startControlPlane that also returns the cluster's CA. The apiserver
// reaches nodes' APIs at their InternalIP with the client certificate kubelet-client.crt
// (kube-apiserver-kubelet-client, which RBAC does not know until a test binds it), and trusts
// only serving certificates of this CA.
func startControlPlanePKI(t testing.TB, dir string) (string, *pki) {
	p := newPKI(t, dir)
	p.issue(t, "apiserver", "kube-apiserver", nil, true)
	p.issue(t, "admin", "admin", []string{"system:masters"}, false)
	p.issue(t, "kubelet-client", "kube-apiserver-kubelet-client", nil, false)
	// The aggregator proxies to extension API servers (metrics-server) as front-proxy-client.
	p.issue(t, "front-proxy-client", "front-proxy-client", nil, false)
	// The controller-manager signs approved CSRs (kubelet-serving ones too) with the cluster CA.
	caKey, _ := x509.MarshalECPrivateKey(p.caKey)
	writePEM(t, filepath.Join(dir, "ca.key"), "EC PRIVATE KEY", caKey)
	saKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	kb, _ := x509.MarshalECPrivateKey(saKey)
	writePEM(t, filepath.Join(dir, "sa.key"), "EC PRIVATE KEY", kb)
	pub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	writePEM(t, filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub)

	var etcdURL string
	startOnFreePorts(t, 2, func(ports []int) <-chan struct{} {
		etcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		return startProc(t, dir, "etcd", "--data-dir", filepath.Join(dir, "etcd-"+strconv.Itoa(ports[0])), "--listen-client-urls", etcdURL,
			"--advertise-client-urls", etcdURL, "--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", "default="+peerURL, "--log-level", "warn")
	}, func([]int) bool { return etcdHealthy(etcdURL) })
	var admin string
	var client kubernetes.Interface
	startOnFreePorts(t, 1, func(ports []int) <-chan struct{} {
		server := "https://127.0.0.1:" + strconv.Itoa(ports[0])
		admin = p.kubeconfig(t, "admin", server)
		client = kubeClient(t, admin)
		return startProc(t, dir, "kube-apiserver", "--etcd-servers", etcdURL, "--bind-address", "127.0.0.1",
			"--advertise-address", "127.0.0.1", "--secure-port", strconv.Itoa(ports[0]),
			"--tls-cert-file", filepath.Join(dir, "apiserver.crt"), "--tls-private-key-file", filepath.Join(dir, "apiserver.key"),
			"--client-ca-file", filepath.Join(dir, "ca.crt"), "--service-account-key-file", filepath.Join(dir, "sa.pub"),
			"--service-account-signing-key-file", filepath.Join(dir, "sa.key"), "--service-account-issuer", "https://kubernetes.default.svc",
			"--service-cluster-ip-range", "10.0.0.0/24", "--authorization-mode", "Node,RBAC", "--cert-dir", filepath.Join(dir, "apiserver-certs"),
			"--kubelet-client-certificate", filepath.Join(dir, "kubelet-client.crt"), "--kubelet-client-key", filepath.Join(dir, "kubelet-client.key"),
			"--kubelet-certificate-authority", filepath.Join(dir, "ca.crt"), "--kubelet-preferred-address-types", "InternalIP,Hostname",
			"--requestheader-client-ca-file", filepath.Join(dir, "ca.crt"), "--requestheader-allowed-names", "front-proxy-client",
			"--requestheader-username-headers", "X-Remote-User", "--requestheader-group-headers", "X-Remote-Group",
			"--requestheader-extra-headers-prefix", "X-Remote-Extra-", "--enable-aggregator-routing=true",
			"--proxy-client-cert-file", filepath.Join(dir, "front-proxy-client.crt"), "--proxy-client-key-file", filepath.Join(dir, "front-proxy-client.key"))
	}, func([]int) bool {
		if _, err := client.Discovery().ServerVersion(); err != nil {
			return false
		}
		_, err := client.CoreV1().Namespaces().Get(context.Background(), "kube-node-lease", metav1.GetOptions{})
		return err == nil
	})
	// The controller-manager and the scheduler serve nothing the tests use: no port (0), so none
	// can be lost to another process between picking and binding it.
	startProc(t, dir, "kube-controller-manager", "--kubeconfig", admin,
		"--secure-port", "0", "--service-account-private-key-file", filepath.Join(dir, "sa.key"),
		"--root-ca-file", filepath.Join(dir, "ca.crt"), "--use-service-account-credentials=false", "--leader-elect=false",
		"--cluster-signing-cert-file", filepath.Join(dir, "ca.crt"), "--cluster-signing-key-file", filepath.Join(dir, "ca.key"))
	startProc(t, dir, "kube-scheduler", "--kubeconfig", admin, "--secure-port", "0", "--leader-elect=false")
	// Pods can be created once the controller-manager made the default service account, which
	// admission looks up.
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := client.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no default service account after 90 s")
		}
	}
	return admin, p
}

// etcdHealthy tells etcd answers its health check at url: a process that took the port first
// would not.
func etcdHealthy(url string) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"health":"true"`)
}

func restConfig(t testing.TB, kubeconfig string) *rest.Config {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func kubeClient(t testing.TB, kubeconfig string) kubernetes.Interface {
	c, err := kubernetes.NewForConfig(restConfig(t, kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClusterOnNodeletRuntime(t *testing.T) {
	clusterScenario(t, newEnv(t, onNodelet), false)
}

// containerd here has no CNI network, so the Deployment's pods share the host's.
func TestClusterOnContainerd(t *testing.T) {
	clusterScenario(t, newEnv(t, onContainerd), true)
}

func clusterScenario(t *testing.T, e *env, hostNetwork bool) {
	cpDir := filepath.Join(t.TempDir(), "cp")
	os.MkdirAll(cpDir, 0o755)
	admin := startControlPlane(t, cpDir)
	client := kubeClient(t, admin)
	ctx := context.Background()
	e.cfg.Kubeconfig = admin
	e.cfg.NodeIPs = []string{"127.0.0.1"}
	e.cfg.Kubelet.NodeStatusUpdateFrequency.Duration, e.cfg.Kubelet.NodeStatusReportFrequency.Duration = 2*time.Second, 2*time.Second
	e.writePod("static", "Always", e.reg+"/busybox:1", loop)
	e.startAgent()

	e.eventually("node Ready", func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, "e2e", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
				return true
			}
		}
		return false
	})
	e.eventually("static pod mirrored", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "static-e2e", metav1.GetOptions{})
		return err == nil && p.Annotations["kubernetes.io/config.mirror"] != "" && p.Status.Phase == v1.PodRunning
	})

	// The pods get the usual service account token volume (kube-api-access-*), injected by the
	// apiserver, and an env value from a config map.
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Data: map[string]string{"greeting": "hello-from-configmap"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replicas := int32(3)
	grace := int64(3)
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{
				TerminationGracePeriodSeconds: &grace, HostNetwork: hostNetwork,
				Containers: []v1.Container{{Name: "app", Image: e.reg + "/busybox:1",
					Env: []v1.EnvVar{{Name: "GREETING", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
						LocalObjectReference: v1.LocalObjectReference{Name: "web"}, Key: "greeting"}}}},
					Command: []string{"/bin/sh", "-c", "echo $GREETING; cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo; " + loop}}}}}}}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("deployment available", func() bool {
		d, err := client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 3
	})
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(pods.Items) != 3 {
		t.Fatalf("pods %v %v", pods, err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "e2e" || p.Status.Phase != v1.PodRunning {
			t.Fatalf("pod %s on %q phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}

	// The agent's events reach the apiserver, signed by the node, about the pods they concern.
	e.eventually("the node's Started events of the pods in the apiserver", func() bool {
		evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		started := map[string]bool{}
		for _, ev := range evs.Items {
			if ev.Reason == "Started" && ev.Source.Component == "kubelet" && ev.Source.Host == "e2e" && ev.InvolvedObject.Kind == "Pod" {
				started[ev.InvolvedObject.Name] = true
			}
		}
		for _, p := range pods.Items {
			if !started[p.Name] {
				return false
			}
		}
		return true
	})

	e.eventually("config map env and service account files seen by the app", func() bool {
		logs, _ := filepath.Glob(filepath.Join(e.cfg.Kubelet.PodLogsDir, "default_web-*", "app", "0.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			if strings.Contains(string(b), "hello-from-configmap") && strings.Contains(string(b), " default") {
				return true
			}
		}
		return false
	})

	// Graceful delete of one pod: it goes, and the Deployment replaces it.
	victim := pods.Items[0]
	start := time.Now()
	if err := client.CoreV1().Pods("default").Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("deleted pod gone", func() bool {
		_, err := client.CoreV1().Pods("default").Get(ctx, victim.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	t.Logf("graceful delete of a pod took %s", time.Since(start).Round(time.Millisecond))

	// Scale to 0: every pod stops and is removed from the runtime.
	if _, err := client.AppsV1().Deployments("default").Patch(ctx, "web", "application/merge-patch+json",
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("scaled to 0", func() bool {
		ps, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		return err == nil && len(ps.Items) == 0 && e.countRunning() == 1 // only the static pod
	})
	lease, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "e2e", metav1.GetOptions{})
	if err != nil || lease.Spec.RenewTime == nil {
		t.Fatalf("lease %v %v", lease, err)
	}
}

// A component that exits before it answers (its port was taken) is started again on new ports.
func TestClusterStartOnFreePortsRetries(t *testing.T) {
	var tries [][]int
	ports := startOnFreePorts(t, 2, func(ports []int) <-chan struct{} {
		tries = append(tries, ports)
		exited := make(chan struct{})
		if len(tries) == 1 {
			close(exited)
		}
		return exited
	}, func([]int) bool { return len(tries) == 2 })
	if len(tries) != 2 || !slices.Equal(ports, tries[1]) || slices.Equal(tries[0], tries[1]) {
		t.Fatalf("tries %v, ports %v: want a second start on other ports", tries, ports)
	}
}
