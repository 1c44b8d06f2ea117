package kubeletconfig

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	upstream "k8s.io/kubelet/config/v1beta1"
)

func TestConstantsAreUpstreams(t *testing.T) {
	for _, c := range []struct{ ours, theirs any }{
		{SchemeGroupVersion.String(), upstream.SchemeGroupVersion.String()},
		{string(KubeletAuthorizationModeAlwaysAllow), string(upstream.KubeletAuthorizationModeAlwaysAllow)},
		{string(KubeletAuthorizationModeWebhook), string(upstream.KubeletAuthorizationModeWebhook)},
		{string(GetChangeDetectionStrategy), string(upstream.GetChangeDetectionStrategy)},
		{string(TTLCacheChangeDetectionStrategy), string(upstream.TTLCacheChangeDetectionStrategy)},
		{string(WatchChangeDetectionStrategy), string(upstream.WatchChangeDetectionStrategy)},
		{string(NeverVerify), string(upstream.NeverVerify)},
		{string(NoneMemoryReservationPolicy), string(upstream.NoneMemoryReservationPolicy)},
		{NoneMemoryManagerPolicy, upstream.NoneMemoryManagerPolicy},
	} {
		if c.ours != c.theirs {
			t.Errorf("%v, upstream %v", c.ours, c.theirs)
		}
	}
}

// TestDecodesAsUpstream: the same files decode strictly to the same JSON with both types, and the
// same files are refused.
func TestDecodesAsUpstream(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
		"kind: KubeletConfiguration\nsyncFrequency: 30s\nmaxPods: 50\nsystemReserved: {cpu: 100m}\nregisterWithTaints: [{key: a, effect: NoSchedule}]\n",
		"logging: {format: text, flushFrequency: 5s, verbosity: 2, vmodule: [{filePattern: x, verbosity: 3}], options: {json: {infoBufferSize: 1Mi}}}\n",
		"logging: {flushFrequency: 5000000000}\n",
		"logging: {flushFrequency: soon}\n",
		"tracing: {endpoint: localhost:4317, samplingRatePerMillion: 10}\n",
		"authentication: {anonymous: {enabled: false}, webhook: {enabled: true, cacheTTL: 2m}, x509: {clientCAFile: /ca}}\nauthorization: {mode: Webhook}\n",
		"memoryManagerPolicy: None\nreservedMemory: [{numaNode: 0, limits: {memory: 1Gi}}]\ncrashLoopBackOff: {maxContainerRestartPeriod: 1m}\n",
		"evictionHard: {memory.available: 100Mi}\nshutdownGracePeriodByPodPriority: [{priority: 1, shutdownGracePeriodSeconds: 5}]\n",
		"notAField: 1\n",
		"logging: {notAField: 1}\n",
		"maxPods: many\n",
	} {
		ours, oursErr := decode(doc, &KubeletConfiguration{})
		theirs, theirsErr := decode(doc, &upstream.KubeletConfiguration{})
		if (oursErr == nil) != (theirsErr == nil) || ours != theirs {
			t.Errorf("%q:\n ours     %s %v\n upstream %s %v", doc, ours, oursErr, theirs, theirsErr)
		}
	}
	if reflect.TypeOf(KubeletConfiguration{}).NumField() != reflect.TypeOf(upstream.KubeletConfiguration{}).NumField() {
		t.Error("field counts differ")
	}
}

func decode(doc string, v any) (string, error) {
	if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	return fmt.Sprintf("%s", b), err
}
