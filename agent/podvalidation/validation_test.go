package podvalidation

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// goodPod is what the file source hands over after defaulting.
func goodPod() *v1.Pod {
	grace := int64(30)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default", UID: "0123456789abcdef0123456789abcdef",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"kubernetes.io/config.source": "file"}},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways, DNSPolicy: v1.DNSClusterFirst, TerminationGracePeriodSeconds: &grace,
			SecurityContext: &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}},
			Volumes: []v1.Volume{
				{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
					LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
					Items:                []v1.KeyToPath{{Key: "a.conf", Path: "conf/a.conf"}}}}},
				{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/log"}}},
			},
			InitContainers: []v1.Container{initContainer("init")},
			Containers:     []v1.Container{container("app")},
		},
	}
}

func container(name string) v1.Container {
	return v1.Container{
		Name: name, Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent,
		TerminationMessagePath: v1.TerminationMessagePathDefault, TerminationMessagePolicy: v1.TerminationMessageReadFile,
		Ports:        []v1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: v1.ProtocolTCP}},
		Env:          []v1.EnvVar{{Name: "MODE", Value: "x"}},
		VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: "sub/dir"}, {Name: "cfg", MountPath: "/etc/cfg"}},
		Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}},
		LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("http")}}},
	}
}

// initContainer runs to completion, so it has no probe.
func initContainer(name string) v1.Container {
	c := container(name)
	c.LivenessProbe = nil
	return c
}

func TestValidateStaticPodAcceptsGoodPod(t *testing.T) {
	if errs := ValidateStaticPod(goodPod()); len(errs) > 0 {
		t.Fatalf("good pod refused: %v", errs.ToAggregate())
	}
}

func TestValidateStaticPodRefuses(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *v1.Pod)
		want   string // the field path and reason the error must carry
	}{
		{"uid steps up", func(p *v1.Pod) { p.UID = "../../../decoy" }, `metadata.uid: Invalid value: "../../../decoy"`},
		{"uid dot-dot", func(p *v1.Pod) { p.UID = ".." }, `metadata.uid: Invalid value: ".."`},
		{"uid dot", func(p *v1.Pod) { p.UID = "." }, `metadata.uid: Invalid value: "."`},
		{"uid with slash", func(p *v1.Pod) { p.UID = "a/b" }, `metadata.uid: Invalid value: "a/b"`},
		{"uid absolute", func(p *v1.Pod) { p.UID = "/etc" }, `metadata.uid: Invalid value: "/etc"`},
		{"uid too long", func(p *v1.Pod) { p.UID = types.UID("a" + strings.Repeat("b", MaxUIDLength)) }, `metadata.uid: Too long`},
		{"uid NUL", func(p *v1.Pod) { p.UID = "a\x00b" }, `metadata.uid: Invalid value`},
		{"name", func(p *v1.Pod) { p.Name = "../x" }, `metadata.name: Invalid value: "../x"`},
		{"namespace", func(p *v1.Pod) { p.Namespace = "a/b" }, `metadata.namespace: Invalid value: "a/b"`},
		{"label key", func(p *v1.Pod) { p.Labels = map[string]string{"a b": "c"} }, `metadata.labels: Invalid value: "a b"`},
		{"annotation key", func(p *v1.Pod) { p.Annotations["../x"] = "" }, `metadata.annotations: Invalid value: "../x"`},
		{"no containers", func(p *v1.Pod) { p.Spec.Containers = nil }, `spec.containers: Required value`},
		{"container name path", func(p *v1.Pod) { p.Spec.Containers[0].Name = "../app" }, `spec.containers[0].name: Invalid value: "../app"`},
		{"container name duplicate across lists", func(p *v1.Pod) { p.Spec.Containers[0].Name = "init" }, `spec.containers[0].name: Duplicate value: "init"`},
		{"init container name", func(p *v1.Pod) { p.Spec.InitContainers[0].Name = "A" }, `spec.initContainers[0].name: Invalid value: "A"`},
		{"no image", func(p *v1.Pod) { p.Spec.Containers[0].Image = "" }, `spec.containers[0].image: Required value`},
		{"image spaces", func(p *v1.Pod) { p.Spec.Containers[0].Image = " busybox" }, `spec.containers[0].image: Invalid value`},
		{"port", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 70000 }, `spec.containers[0].ports[0].containerPort: Invalid value: 70000`},
		{"host port", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = -1 }, `spec.containers[0].ports[0].hostPort: Invalid value: -1`},
		{"port protocol", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = "ICMP" }, `spec.containers[0].ports[0].protocol: Unsupported value: "ICMP"`},
		{"port name", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].Name = "this-name-is-too-long" }, `spec.containers[0].ports[0].name: Invalid value`},
		{"env name", func(p *v1.Pod) { p.Spec.Containers[0].Env[0].Name = "A=B" }, `spec.containers[0].env[0].name: Invalid value: "A=B"`},
		{"env value and valueFrom", func(p *v1.Pod) {
			p.Spec.Containers[0].Env[0].ValueFrom = &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}
		}, `spec.containers[0].env[0].valueFrom: Invalid value`},
		{"env fieldRef", func(p *v1.Pod) {
			p.Spec.Containers[0].Env[0] = v1.EnvVar{Name: "X", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.volumes"}}}
		}, `spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: "spec.volumes"`},
		{"envFrom prefix", func(p *v1.Pod) {
			p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{Prefix: "A=", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "c"}}}}
		}, `spec.containers[0].envFrom[0].prefix: Invalid value: "A="`},
		{"envFrom no source", func(p *v1.Pod) { p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{}} }, `spec.containers[0].envFrom[0]: Invalid value`},
		{"mount unknown volume", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].Name = "nope" }, `spec.containers[0].volumeMounts[0].name: Not found: "nope"`},
		{"mount path empty", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].MountPath = "" }, `spec.containers[0].volumeMounts[0].mountPath: Required value`},
		{"mount path duplicate", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[1].MountPath = "/data/" }, `spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/data/": must be unique`},
		{"mount path steps up", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].MountPath = "/../../etc" }, `spec.containers[0].volumeMounts[0].mountPath: Invalid value: "/../../etc"`},
		{"subPath steps up", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "a/../../x" }, `spec.containers[0].volumeMounts[0].subPath: Invalid value: "a/../../x"`},
		{"subPath absolute", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "/etc" }, `spec.containers[0].volumeMounts[0].subPath: Invalid value: "/etc"`},
		{"subPathExpr steps up", func(p *v1.Pod) {
			p.Spec.Containers[0].VolumeMounts[0].SubPath = ""
			p.Spec.Containers[0].VolumeMounts[0].SubPathExpr = "$(X)/.."
		}, `spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: "$(X)/.."`},
		{"subPath and subPathExpr", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPathExpr = "$(X)" }, `spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: "$(X)": subPathExpr and subPath are mutually exclusive`},
		{"recursiveReadOnly on a writable mount", func(p *v1.Pod) {
			mode := v1.RecursiveReadOnlyEnabled
			p.Spec.Containers[0].VolumeMounts[0].RecursiveReadOnly = &mode
		}, `spec.containers[0].volumeMounts[0].recursiveReadOnly: Forbidden: may only be specified when readOnly is true`},
		{"recursiveReadOnly with propagation", func(p *v1.Pod) {
			mode, prop := v1.RecursiveReadOnlyIfPossible, v1.MountPropagationHostToContainer
			p.Spec.Containers[0].VolumeMounts[0].ReadOnly = true
			p.Spec.Containers[0].VolumeMounts[0].RecursiveReadOnly, p.Spec.Containers[0].VolumeMounts[0].MountPropagation = &mode, &prop
		}, `spec.containers[0].volumeMounts[0].recursiveReadOnly: Forbidden: may only be specified when mountPropagation is None or not specified`},
		{"recursiveReadOnly mode", func(p *v1.Pod) {
			mode := v1.RecursiveReadOnlyMode("Always")
			p.Spec.Containers[0].VolumeMounts[0].RecursiveReadOnly = &mode
		}, `spec.containers[0].volumeMounts[0].recursiveReadOnly: Unsupported value: "Always"`},
		{"requests above limits", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("2") }, `spec.containers[0].resources.requests[cpu]: Invalid value: "2": must be less than or equal to cpu limit of 1`},
		{"negative limit", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits[v1.ResourceMemory] = resource.MustParse("-1") }, `spec.containers[0].resources.limits[memory]: Invalid value: "-1"`},
		{"termination message path relative", func(p *v1.Pod) { p.Spec.Containers[0].TerminationMessagePath = "../../x" }, `spec.containers[0].terminationMessagePath: Invalid value: "../../x"`},
		{"termination message path steps up", func(p *v1.Pod) { p.Spec.Containers[0].TerminationMessagePath = "/dev/../x" }, `spec.containers[0].terminationMessagePath: Invalid value: "/dev/../x"`},
		{"probe two handlers", func(p *v1.Pod) {
			p.Spec.Containers[0].LivenessProbe.Exec = &v1.ExecAction{Command: []string{"true"}}
		}, `spec.containers[0].livenessProbe.httpGet: Forbidden: may not specify more than 1 handler type`},
		{"probe no handler", func(p *v1.Pod) { p.Spec.Containers[0].ReadinessProbe = &v1.Probe{} }, `spec.containers[0].readinessProbe: Required value: must specify a handler type`},
		{"probe port", func(p *v1.Pod) { p.Spec.Containers[0].LivenessProbe.HTTPGet.Port = intstr.FromInt32(0) }, `spec.containers[0].livenessProbe.httpGet.port: Invalid value: "0"`},
		{"lifecycle no handler", func(p *v1.Pod) { p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{}} }, `spec.containers[0].lifecycle.preStop: Required value`},
		{"pull policy", func(p *v1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" }, `spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes"`},
		{"volume name path", func(p *v1.Pod) {
			p.Spec.Volumes[0].Name = "../../../../../../somedir"
			p.Spec.Containers[0].VolumeMounts[0].Name = "../../../../../../somedir"
		}, `spec.volumes[0].name: Invalid value: "../../../../../../somedir"`},
		{"volume name duplicate", func(p *v1.Pod) { p.Spec.Volumes[1].Name = "data" }, `spec.volumes[1].name: Duplicate value: "data"`},
		{"volume no source", func(p *v1.Pod) { p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{} }, `spec.volumes[0]: Required value: must specify a volume type`},
		{"volume two sources", func(p *v1.Pod) {
			p.Spec.Volumes[0].HostPath = &v1.HostPathVolumeSource{Path: "/"}
		}, `spec.volumes[0].emptyDir: Forbidden: may not specify more than 1 volume type`},
		{"hostPath steps up", func(p *v1.Pod) { p.Spec.Volumes[2].HostPath.Path = "/var/../etc" }, `spec.volumes[2].hostPath.path: Invalid value: "/var/../etc"`},
		{"hostPath empty", func(p *v1.Pod) { p.Spec.Volumes[2].HostPath.Path = "" }, `spec.volumes[2].hostPath.path: Required value`},
		{"configMap item steps up", func(p *v1.Pod) { p.Spec.Volumes[1].ConfigMap.Items[0].Path = "a/../../x" }, `spec.volumes[1].configMap.items[0].path: Invalid value: "a/../../x"`},
		{"configMap item starts with ..", func(p *v1.Pod) { p.Spec.Volumes[1].ConfigMap.Items[0].Path = "..data" }, `spec.volumes[1].configMap.items[0].path: Invalid value: "..data": must not start with '..'`},
		{"configMap item absolute", func(p *v1.Pod) { p.Spec.Volumes[1].ConfigMap.Items[0].Path = "/etc/passwd" }, `spec.volumes[1].configMap.items[0].path: Invalid value: "/etc/passwd"`},
		{"configMap item duplicate", func(p *v1.Pod) {
			p.Spec.Volumes[1].ConfigMap.Items = append(p.Spec.Volumes[1].ConfigMap.Items, v1.KeyToPath{Key: "b", Path: "conf//a.conf"})
		}, `spec.volumes[1].configMap.items[1].path: Duplicate value: "conf//a.conf"`},
		{"configMap key", func(p *v1.Pod) { p.Spec.Volumes[1].ConfigMap.Items[0].Key = "../k" }, `spec.volumes[1].configMap.items[0].key: Invalid value: "../k"`},
		{"configMap mode", func(p *v1.Pod) { m := int32(0o4777); p.Spec.Volumes[1].ConfigMap.DefaultMode = &m }, `spec.volumes[1].configMap.defaultMode: Invalid value: 2559`},
		{"secret item steps up", func(p *v1.Pod) {
			p.Spec.Volumes[1].VolumeSource = v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s", Items: []v1.KeyToPath{{Key: "k", Path: "../k"}}}}
		}, `spec.volumes[1].secret.items[0].path: Invalid value: "../k"`},
		{"downwardAPI item steps up", func(p *v1.Pod) {
			p.Spec.Volumes[1].VolumeSource = v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: "../labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}
		}, `spec.volumes[1].downwardAPI.items[0].path: Invalid value: "../labels"`},
		{"projected duplicate across sources", func(p *v1.Pod) {
			p.Spec.Volumes[1].VolumeSource = v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "c"}, Items: []v1.KeyToPath{{Key: "k", Path: "f"}}}},
				{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Items: []v1.KeyToPath{{Key: "k", Path: "f"}}}}}}}
		}, `spec.volumes[1].projected.sources[1].secret.items[0].path: Duplicate value: "f"`},
		{"projected item steps up", func(p *v1.Pod) {
			p.Spec.Volumes[1].VolumeSource = v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "x/../../token"}}}}}
		}, `spec.volumes[1].projected.sources[0].serviceAccountToken.path: Invalid value: "x/../../token"`},
		{"ephemeral containers", func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", Image: "busybox"}}}
		}, `spec.ephemeralContainers: Forbidden: static pods may not have ephemeral containers`},
		{"restartPolicy", func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, `spec.restartPolicy: Unsupported value: "Sometimes"`},
		{"dnsPolicy", func(p *v1.Pod) { p.Spec.DNSPolicy = "Google" }, `spec.dnsPolicy: Unsupported value: "Google"`},
		{"dnsPolicy None without servers", func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone }, `spec.dnsConfig.nameservers: Required value`},
		{"hostname", func(p *v1.Pod) { p.Spec.Hostname = "a/b" }, `spec.hostname: Invalid value: "a/b"`},
		{"subdomain", func(p *v1.Pod) { p.Spec.Subdomain = "A_B" }, `spec.subdomain: Invalid value: "A_B"`},
		{"hostAliases ip", func(p *v1.Pod) { p.Spec.HostAliases = []v1.HostAlias{{IP: "999.1.1.1", Hostnames: []string{"a"}}} }, `spec.hostAliases[0].ip: Invalid value: "999.1.1.1"`},
		{"hostAliases hostname", func(p *v1.Pod) { p.Spec.HostAliases = []v1.HostAlias{{IP: "10.0.0.1", Hostnames: []string{"a\nb"}}} }, `spec.hostAliases[0].hostnames[0]: Invalid value`},
		{"sysctl name", func(p *v1.Pod) { p.Spec.SecurityContext.Sysctls[0].Name = "../../proc/sys/kernel/x" }, `spec.securityContext.sysctls[0].name: Invalid value: "../../proc/sys/kernel/x"`},
		{"runAsUser", func(p *v1.Pod) { u := int64(-1); p.Spec.SecurityContext.RunAsUser = &u }, `spec.securityContext.runAsUser: Invalid value: -1`},
		{"container runAsGroup", func(p *v1.Pod) {
			g := int64(1 << 40)
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{RunAsGroup: &g}
		}, `spec.containers[0].securityContext.runAsGroup: Invalid value`},
		{"privileged without escalation", func(p *v1.Pod) {
			t, f := true, false
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: &t, AllowPrivilegeEscalation: &f}
		}, `spec.containers[0].securityContext: Invalid value`},
		{"toleration with a value and Exists", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists, Value: "v"}}
		}, `spec.tolerations[0].operator: Invalid value: "v": value must be empty when`},
		{"toleration without a key, not Exists", func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Value: "v"}} },
			`spec.tolerations[0].operator: Invalid value: "": operator must be Exists when`},
		{"tolerationSeconds without NoExecute", func(p *v1.Pod) {
			s := int64(5)
			p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists, TolerationSeconds: &s}}
		}, `spec.tolerations[0].effect: Invalid value: "": effect must be 'NoExecute'`},
		{"runtimeClassName", func(p *v1.Pod) { n := "../runsc"; p.Spec.RuntimeClassName = &n }, `spec.runtimeClassName: Invalid value: "../runsc"`},
		{"negative overhead", func(p *v1.Pod) { p.Spec.Overhead = v1.ResourceList{v1.ResourceMemory: resource.MustParse("-1Mi")} },
			`spec.overhead.limits[memory]: Invalid value: "-1Mi"`},
		{"sidecar restartPolicy on app container", func(p *v1.Pod) {
			a := v1.ContainerRestartPolicyAlways
			p.Spec.Containers[0].RestartPolicy = &a
		}, `spec.containers[0].restartPolicy: Forbidden`},
		{"probe on an init container", func(p *v1.Pod) { p.Spec.InitContainers[0].LivenessProbe = p.Spec.Containers[0].LivenessProbe },
			`spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers without restartPolicy=Always`},
		{"readiness probe on an init container", func(p *v1.Pod) {
			p.Spec.InitContainers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		}, `spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always`},
		{"startup probe on an init container", func(p *v1.Pod) {
			p.Spec.InitContainers[0].StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		}, `spec.initContainers[0].startupProbe: Forbidden: may not be set for init containers without restartPolicy=Always`},
		{"hook on an init container", func(p *v1.Pod) {
			p.Spec.InitContainers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		}, `spec.initContainers[0].lifecycle: Forbidden: may not be set for init containers without restartPolicy=Always`},
		{"grace period on a readiness probe", func(p *v1.Pod) {
			g := int64(5)
			p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
				TerminationGracePeriodSeconds: &g}
		}, `spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := goodPod()
			tt.mutate(p)
			errs := ValidateStaticPod(p)
			if len(errs) == 0 {
				t.Fatal("accepted")
			}
			if got := errs.ToAggregate().Error(); !strings.Contains(got, tt.want) {
				t.Fatalf("error %q\ndoes not contain %q", got, tt.want)
			}
		})
	}
}

func TestValidateUIDAcceptsSafeElements(t *testing.T) {
	for _, uid := range []string{"0123456789abcdef0123456789abcdef", "3f2a9c1e-8b4d-4c2e-9f1a-1234567890ab", "web.1_a-b"} {
		t.Run(uid, func(t *testing.T) {
			if errs := ValidateUID(uid, nil); len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
		})
	}
}
