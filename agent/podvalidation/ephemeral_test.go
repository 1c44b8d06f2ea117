package podvalidation

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// debugContainer is what `kubectl debug --image=busybox --target=app` adds, after defaulting.
func debugContainer(name string) v1.EphemeralContainer {
	return v1.EphemeralContainer{TargetContainerName: "app", EphemeralContainerCommon: v1.EphemeralContainerCommon{
		Name: name, Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent, Stdin: true, TTY: true,
		TerminationMessagePath: v1.TerminationMessagePathDefault, TerminationMessagePolicy: v1.TerminationMessageReadFile,
		VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
	}}
}

func TestValidateEphemeralContainersAcceptsDebugContainers(t *testing.T) {
	p := goodPod()
	p.Spec.EphemeralContainers = []v1.EphemeralContainer{debugContainer("debugger-1"), debugContainer("debugger-2")}
	p.Spec.EphemeralContainers[1].TargetContainerName = ""
	if errs := ValidateEphemeralContainers(&p.Spec, field.NewPath("spec", "ephemeralContainers")); len(errs) > 0 {
		t.Fatalf("refused: %v", errs.ToAggregate())
	}
}

func TestValidateEphemeralContainersRefuses(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	tests := []struct {
		name   string
		mutate func(ec *v1.EphemeralContainer)
		want   string
	}{
		{"ports", func(ec *v1.EphemeralContainer) {
			ec.Ports = []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}}
		},
			`spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container`},
		{"liveness probe", func(ec *v1.EphemeralContainer) {
			ec.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, SuccessThreshold: 1}
		}, `spec.ephemeralContainers[1].livenessProbe: Forbidden`},
		{"readiness probe", func(ec *v1.EphemeralContainer) {
			ec.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		}, `spec.ephemeralContainers[1].readinessProbe: Forbidden`},
		{"lifecycle", func(ec *v1.EphemeralContainer) {
			ec.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		}, `spec.ephemeralContainers[1].lifecycle: Forbidden`},
		{"resources", func(ec *v1.EphemeralContainer) {
			ec.Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
		}, `spec.ephemeralContainers[1].resources: Forbidden`},
		{"restartPolicy", func(ec *v1.EphemeralContainer) { ec.RestartPolicy = &always }, `spec.ephemeralContainers[1].restartPolicy: Forbidden`},
		{"name of an app container", func(ec *v1.EphemeralContainer) { ec.Name = "app" }, `spec.ephemeralContainers[1].name: Duplicate value: "app"`},
		{"name of an init container", func(ec *v1.EphemeralContainer) { ec.Name = "init" }, `spec.ephemeralContainers[1].name: Duplicate value: "init"`},
		{"name of an earlier debug container", func(ec *v1.EphemeralContainer) { ec.Name = "debugger-1" }, `spec.ephemeralContainers[1].name: Duplicate value: "debugger-1"`},
		{"name not a path element", func(ec *v1.EphemeralContainer) { ec.Name = "../x" }, `spec.ephemeralContainers[1].name: Invalid value: "../x"`},
		{"unknown target", func(ec *v1.EphemeralContainer) { ec.TargetContainerName = "nope" }, `spec.ephemeralContainers[1].targetContainerName: Not found: "nope"`},
		{"debug container as target", func(ec *v1.EphemeralContainer) { ec.TargetContainerName = "debugger-1" }, `spec.ephemeralContainers[1].targetContainerName: Not found: "debugger-1"`},
		{"subPath", func(ec *v1.EphemeralContainer) { ec.VolumeMounts[0].SubPath = "x" }, `spec.ephemeralContainers[1].volumeMounts[0].subPath: Forbidden`},
		{"unknown volume", func(ec *v1.EphemeralContainer) { ec.VolumeMounts[0].Name = "nope" }, `spec.ephemeralContainers[1].volumeMounts[0].name: Not found: "nope"`},
		{"no image", func(ec *v1.EphemeralContainer) { ec.Image = "" }, `spec.ephemeralContainers[1].image: Required value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := goodPod()
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{debugContainer("debugger-1"), debugContainer("debugger-2")}
			tt.mutate(&p.Spec.EphemeralContainers[1])
			fld := field.NewPath("spec", "ephemeralContainers")
			if errs := ValidateEphemeralContainer(&p.Spec, 0, fld.Index(0)); len(errs) > 0 {
				t.Fatalf("the good one refused too: %v", errs.ToAggregate())
			}
			errs := ValidateEphemeralContainers(&p.Spec, fld)
			if len(errs) == 0 {
				t.Fatal("accepted")
			}
			if got := errs.ToAggregate().Error(); !strings.Contains(got, tt.want) {
				t.Fatalf("error %q\ndoes not contain %q", got, tt.want)
			}
		})
	}
}

// A static pod has no ephemeralcontainers subresource to come through, so the API server never
// lets one have them; the file and URL sources refuse them even when each one is valid.
func TestValidateStaticPodRefusesValidEphemeralContainers(t *testing.T) {
	p := goodPod()
	p.Spec.EphemeralContainers = []v1.EphemeralContainer{debugContainer("debugger")}
	errs := ValidateStaticPod(p)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "static pods may not have ephemeral containers") {
		t.Fatalf("errors %v", errs.ToAggregate())
	}
}
