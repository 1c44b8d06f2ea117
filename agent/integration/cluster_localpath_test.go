//go:build cluster

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestClusterLocalPathOnNodeletRuntime(t *testing.T) { localPathScenario(t, newEnv(t, onNodelet)) }
func TestClusterLocalPathOnContainerd(t *testing.T)     { localPathScenario(t, newEnv(t, onContainerd)) }

// localPathScenario: dynamic provisioning by a provisioner nobody here wrote, rancher's
// local-path-provisioner, run as its deployment runs it but outside the cluster (its helper pods,
// which make and remove the volumes' folders, run on the node). A StatefulSet of three replicas
// gets a local PV each (WaitForFirstConsumer, node affinity to this node), each writes its name;
// the agent is restarted under them; every replica is still running, unrestarted, and its data
// intact; deleting the claims makes the provisioner remove the folders through the node again.
func localPathScenario(t *testing.T, e *env) {
	bin := filepath.Join(kubeBinDir(), "local-path-provisioner")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s missing: build it with hack/kube/build.sh local-path-provisioner, or set KUBE_BIN_DIR", bin)
	}
	client := e.joinLoopbackCluster(t)
	ctx := context.Background()
	e.startAgent()
	e.eventually("node Ready", func() bool { return nodeCondition(ctx, client, v1.NodeReady) == v1.ConditionTrue })

	const ns = "local-path-storage"
	volumes := filepath.Join(t.TempDir(), "local-path")
	if err := os.MkdirAll(volumes, 0o755); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`{"nodePathMap":[{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":[%q]}]}`, volumes)
	// The scripts and helper pod of the provisioner's own deployment, on the host's network as
	// every pod of these tests (the runtimes have no pod network here).
	helperPod := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: helper-pod
spec:
  hostNetwork: true
  containers:
  - name: helper-pod
    image: %s/busybox:1
    imagePullPolicy: IfNotPresent
`, e.reg)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "local-path-config"},
		Data: map[string]string{"config.json": config, "helperPod.yaml": helperPod,
			"setup":    "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"\n",
			"teardown": "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"\n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the namespace's default service account", func() bool {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	dir := filepath.Join(t.TempDir(), "provisioner")
	os.MkdirAll(dir, 0o755)
	startProc(t, dir, "local-path-provisioner", "--debug", "start", "--kubeconfig", e.cfg.Kubeconfig, "--namespace", ns,
		"--configmap-name", "local-path-config", "--service-account-name", "default", "--helper-image", e.reg+"/busybox:1")

	wait := storagev1.VolumeBindingWaitForFirstConsumer
	del := v1.PersistentVolumeReclaimDelete
	if _, err := client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "local-path", Annotations: map[string]string{"defaultVolumeType": "local"}},
		Provisioner: "rancher.io/local-path", VolumeBindingMode: &wait, ReclaimPolicy: &del}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replicas, grace, class := int32(3), int64(2), "local-path"
	labels := map[string]string{"app": "db"}
	script := `test -f /data/id || echo "$POD_NAME" > /data/id; sync; exec sleep 3600`
	if _, err := client.AppsV1().StatefulSets("default").Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels}, ServiceName: "db",
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{
				HostNetwork: true, TerminationGracePeriodSeconds: &grace,
				Containers: []v1.Container{{Name: "app", Image: e.reg + "/busybox:1", Command: []string{"/bin/sh", "-c", script},
					Env: []v1.EnvVar{{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
					ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-s", "/data/id"}}},
						PeriodSeconds: 1},
					VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}},
			VolumeClaimTemplates: []v1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: v1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
					Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("16Mi")}}}}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := []string{"db-0", "db-1", "db-2"}
	allReady := func() bool {
		for _, n := range names {
			if ready, _ := podReadyAndRestarts(ctx, client, n); !ready {
				return false
			}
		}
		return true
	}
	e.eventually("three replicas ready on provisioned volumes", allReady)
	paths := map[string]string{}
	for _, n := range names {
		pvc, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data-"+n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pv, err := client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil || pv.Spec.Local == nil || pv.Spec.NodeAffinity == nil {
			t.Fatalf("the PV of %s: %+v %v, want a local PV with node affinity", n, pv, err)
		}
		paths[n] = pv.Spec.Local.Path
	}

	e.killAgent()
	e.startAgent()
	e.eventually("the replicas ready after the agent's restart", func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, "e2e", metav1.GetOptions{})
		return err == nil && n.Status.NodeInfo.BootID != "" && allReady()
	})
	for _, n := range names {
		if _, restarts := podReadyAndRestarts(ctx, client, n); restarts != 0 {
			t.Errorf("%s restarted %d times across the agent's restart", n, restarts)
		}
		b, err := os.ReadFile(filepath.Join(paths[n], "id"))
		if err != nil || strings.TrimSpace(string(b)) != n {
			t.Errorf("%s's volume holds %q (%v)", n, b, err)
		}
	}

	// The claims deleted, the provisioner's helper pods remove the folders on the node.
	if err := client.AppsV1().StatefulSets("default").Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the replicas gone", func() bool {
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=db"})
		return err == nil && len(pods.Items) == 0
	})
	for _, n := range names {
		if err := client.CoreV1().PersistentVolumeClaims("default").Delete(ctx, "data-"+n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually("the volumes' folders removed", func() bool {
		for _, p := range paths {
			if _, err := os.Stat(p); err == nil {
				return false
			}
		}
		return true
	})
}

// podReadyAndRestarts is a default-namespace pod's Ready condition and its containers' restarts.
func podReadyAndRestarts(ctx context.Context, client kubernetes.Interface, name string) (bool, int32) {
	p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, 0
	}
	var restarts int32
	for _, c := range p.Status.ContainerStatuses {
		restarts += c.RestartCount
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue, restarts
		}
	}
	return false, restarts
}
