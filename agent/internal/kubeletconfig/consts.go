package kubeletconfig

import "k8s.io/apimachinery/pkg/runtime/schema"

// SchemeGroupVersion is the apiVersion a KubeletConfiguration file names.
var SchemeGroupVersion = schema.GroupVersion{Group: "kubelet.config.k8s.io", Version: "v1beta1"}

// The values of the format's enumerations the agent compares against (consts_test.go holds them
// equal to k8s.io/kubelet's, types included).
const (
	KubeletAuthorizationModeAlwaysAllow KubeletAuthorizationMode               = "AlwaysAllow"
	KubeletAuthorizationModeWebhook     KubeletAuthorizationMode               = "Webhook"
	GetChangeDetectionStrategy          ResourceChangeDetectionStrategy        = "Get"
	TTLCacheChangeDetectionStrategy     ResourceChangeDetectionStrategy        = "Cache"
	WatchChangeDetectionStrategy        ResourceChangeDetectionStrategy        = "Watch"
	NeverVerify                         ImagePullCredentialsVerificationPolicy = "NeverVerify"
	NoneMemoryReservationPolicy         MemoryReservationPolicy                = "None"
	// NoneMemoryManagerPolicy is untyped upstream: memoryManagerPolicy is a plain string.
	NoneMemoryManagerPolicy = "None"
)
