// Package kubeclient is the agent's client of the kube-apiserver: typed access to exactly the
// resources a node agent reads and writes, on client-go's REST client.
//
// client-go's generated clientset would do the same, but linking it links every API group, its
// typed clients, apply configurations, informers and listers, and its scheme registers all of
// them at start: about 15 MB of the binary paged in by every mode of nodelet, `nodelet runtime`
// included, which never talks to an apiserver. The scheme here holds only the groups below.
//
// The per-resource interfaces are subsets of client-go's typed interfaces with the same method
// signatures, so a typed client of a fake clientset satisfies them in tests.
package kubeclient

import (
	"context"
	"fmt"
	"net/http"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/nodelet/nodelet/agent/kubeconfig"
	"github.com/nodelet/nodelet/internal/lazy"
)

// Scheme knows the agent's API groups only; event recording uses it to name objects' kinds. It is
// built on first use rather than in an init, so the modes that never reach an apiserver
// (`nodelet runtime`, standalone `nodelet up`) do not register these types at start.
func Scheme() *runtime.Scheme { return scheme.Get() }

var scheme = lazy.Value[*runtime.Scheme]{New: func() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	utilruntime.Must(v1.AddToScheme(s))
	utilruntime.Must(coordinationv1.AddToScheme(s))
	utilruntime.Must(nodev1.AddToScheme(s))
	utilruntime.Must(authnv1.AddToScheme(s))
	utilruntime.Must(authzv1.AddToScheme(s))
	utilruntime.Must(certificatesv1.AddToScheme(s))
	utilruntime.Must(storagev1.AddToScheme(s))
	return s
}}

var (
	codecs     = lazy.Value[serializer.CodecFactory]{New: func() serializer.CodecFactory { return serializer.NewCodecFactory(Scheme()) }}
	parameters = lazy.Value[runtime.ParameterCodec]{New: func() runtime.ParameterCodec { return runtime.NewParameterCodec(Scheme()) }}
)

// Interface is a Client's accessors, as client-go's kubernetes.Interface is a clientset's: what
// the agent is handed, so that a test can hand in a fake clientset (test/harness/kubefake adapts
// one). Each part declares the few accessors it uses.
type Interface interface {
	Pods(namespace string) PodInterface
	Nodes() NodeInterface
	Leases(namespace string) LeaseInterface
	Services(namespace string) ServiceInterface
	Secrets(namespace string) SecretInterface
	ConfigMaps(namespace string) ConfigMapInterface
	PersistentVolumeClaims(namespace string) PersistentVolumeClaimInterface
	PersistentVolumes() PersistentVolumeInterface
	ServiceAccounts(namespace string) ServiceAccountInterface
	Events(namespace string) EventInterface
	RuntimeClasses() RuntimeClassInterface
	TokenReviews() TokenReviewInterface
	SubjectAccessReviews() SubjectAccessReviewInterface
	CertificateSigningRequests() CertificateSigningRequestInterface
	CSINodes() CSINodeInterface
	CSIDrivers() CSIDriverInterface
	VolumeAttachments() VolumeAttachmentInterface
}

// Client reaches the apiserver of one kubeconfig. All groups share one HTTP client (so one
// connection pool) and one rate limiter, as the clientset's do.
type Client struct {
	core, coordination, node, authn, authz, certificates, storage rest.Interface
}

// New makes a client; nothing is dialled until the first request.
func New(c *rest.Config) (*Client, error) {
	cfg := *c
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, fmt.Errorf("kubeconfig: burst must be positive when qps is set")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	hc, err := rest.HTTPClientFor(&cfg)
	if err != nil {
		return nil, err
	}
	cl := &Client{}
	for _, g := range []struct {
		into *rest.Interface
		gv   schema.GroupVersion
	}{
		{&cl.core, v1.SchemeGroupVersion},
		{&cl.coordination, coordinationv1.SchemeGroupVersion},
		{&cl.node, nodev1.SchemeGroupVersion},
		{&cl.authn, authnv1.SchemeGroupVersion},
		{&cl.authz, authzv1.SchemeGroupVersion},
		{&cl.certificates, certificatesv1.SchemeGroupVersion},
		{&cl.storage, storagev1.SchemeGroupVersion},
	} {
		if *g.into, err = groupClient(cfg, hc, g.gv); err != nil {
			return nil, err
		}
	}
	return cl, nil
}

// Load makes the client of the kubeconfig file at path with the agent's request rate (kubeAPIQPS,
// negative for no limit, and kubeAPIBurst) and content type ("" keeps the file's).
func Load(path string, qps float32, burst int, contentType string) (*Client, error) {
	rc, err := kubeconfig.Load(path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = qps, burst
	if contentType != "" {
		rc.ContentType = contentType
	}
	c, err := New(rc)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return c, nil
}

func groupClient(cfg rest.Config, hc *http.Client, gv schema.GroupVersion) (rest.Interface, error) {
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.NegotiatedSerializer = codecs.Get().WithoutConversion()
	return rest.RESTClientForConfigAndClient(&cfg, hc)
}

// The resources, each with the verbs the agent uses.

// PodInterface reads, writes and watches pods.
type PodInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Pod, error)
	List(ctx context.Context, opts metav1.ListOptions) (*v1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, pod *v1.Pod, opts metav1.CreateOptions) (*v1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Pod, error)
}

// NodeInterface registers the Node and keeps its status.
type NodeInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*v1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, node *v1.Node, opts metav1.CreateOptions) (*v1.Node, error)
	UpdateStatus(ctx context.Context, node *v1.Node, opts metav1.UpdateOptions) (*v1.Node, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Node, error)
}

// LeaseInterface renews the node's Lease.
type LeaseInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// ServiceInterface lists and watches Services.
type ServiceInterface interface {
	List(ctx context.Context, opts metav1.ListOptions) (*v1.ServiceList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// SecretInterface reads and watches Secrets.
type SecretInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Secret, error)
	List(ctx context.Context, opts metav1.ListOptions) (*v1.SecretList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// ConfigMapInterface reads and watches ConfigMaps.
type ConfigMapInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.ConfigMap, error)
	List(ctx context.Context, opts metav1.ListOptions) (*v1.ConfigMapList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// PersistentVolumeClaimInterface reads the claims of pods' volumes, and patches the status of
// one the node expands.
type PersistentVolumeClaimInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.PersistentVolumeClaim, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.PersistentVolumeClaim, error)
}

// PersistentVolumeInterface reads the volumes claims are bound to.
type PersistentVolumeInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.PersistentVolume, error)
}

// ServiceAccountInterface requests service account tokens (TokenRequest).
type ServiceAccountInterface interface {
	CreateToken(ctx context.Context, serviceAccountName string, tr *authnv1.TokenRequest, opts metav1.CreateOptions) (*authnv1.TokenRequest, error)
}

// EventInterface writes events; its verbs are those of client-go's record.EventSink.
type EventInterface interface {
	Create(ctx context.Context, ev *v1.Event, opts metav1.CreateOptions) (*v1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Event, error)
}

// RuntimeClassInterface reads and watches RuntimeClasses.
type RuntimeClassInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*nodev1.RuntimeClass, error)
	List(ctx context.Context, opts metav1.ListOptions) (*nodev1.RuntimeClassList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// TokenReviewInterface asks the apiserver who a bearer token belongs to.
type TokenReviewInterface interface {
	Create(ctx context.Context, tr *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error)
}

// SubjectAccessReviewInterface asks the apiserver whether a user may do something.
type SubjectAccessReviewInterface interface {
	Create(ctx context.Context, sar *authzv1.SubjectAccessReview, opts metav1.CreateOptions) (*authzv1.SubjectAccessReview, error)
}

// CertificateSigningRequestInterface requests certificates and waits for them.
type CertificateSigningRequestInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error)
	Create(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// CSINodeInterface keeps the node's CSINode: the CSI drivers registered on it.
type CSINodeInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*storagev1.CSINode, error)
	Create(ctx context.Context, n *storagev1.CSINode, opts metav1.CreateOptions) (*storagev1.CSINode, error)
	Update(ctx context.Context, n *storagev1.CSINode, opts metav1.UpdateOptions) (*storagev1.CSINode, error)
}

// CSIDriverInterface reads what a CSI driver asks of the node (attach, pod info, fsGroup policy).
type CSIDriverInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*storagev1.CSIDriver, error)
}

// VolumeAttachmentInterface reads whether a volume is attached to the node, for drivers that attach.
type VolumeAttachmentInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*storagev1.VolumeAttachment, error)
}

func (c *Client) VolumeAttachments() VolumeAttachmentInterface {
	return resource[*storagev1.VolumeAttachment, *storagev1.VolumeAttachmentList]{c.storage, "volumeattachments", "",
		func() *storagev1.VolumeAttachment { return &storagev1.VolumeAttachment{} },
		func() *storagev1.VolumeAttachmentList { return &storagev1.VolumeAttachmentList{} }}
}

func (c *Client) CSINodes() CSINodeInterface {
	return resource[*storagev1.CSINode, *storagev1.CSINodeList]{c.storage, "csinodes", "",
		func() *storagev1.CSINode { return &storagev1.CSINode{} }, func() *storagev1.CSINodeList { return &storagev1.CSINodeList{} }}
}
func (c *Client) CSIDrivers() CSIDriverInterface {
	return resource[*storagev1.CSIDriver, *storagev1.CSIDriverList]{c.storage, "csidrivers", "",
		func() *storagev1.CSIDriver { return &storagev1.CSIDriver{} }, func() *storagev1.CSIDriverList { return &storagev1.CSIDriverList{} }}
}

func (c *Client) Pods(namespace string) PodInterface {
	return resource[*v1.Pod, *v1.PodList]{c.core, "pods", namespace, newPod, newPodList}
}
func (c *Client) Nodes() NodeInterface {
	return resource[*v1.Node, *v1.NodeList]{c.core, "nodes", "", newNode, newNodeList}
}
func (c *Client) Leases(namespace string) LeaseInterface {
	return resource[*coordinationv1.Lease, *coordinationv1.LeaseList]{c.coordination, "leases", namespace,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} }, func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} }}
}
func (c *Client) Services(namespace string) ServiceInterface {
	return resource[*v1.Service, *v1.ServiceList]{c.core, "services", namespace,
		func() *v1.Service { return &v1.Service{} }, func() *v1.ServiceList { return &v1.ServiceList{} }}
}
func (c *Client) Secrets(namespace string) SecretInterface {
	return resource[*v1.Secret, *v1.SecretList]{c.core, "secrets", namespace,
		func() *v1.Secret { return &v1.Secret{} }, func() *v1.SecretList { return &v1.SecretList{} }}
}
func (c *Client) ConfigMaps(namespace string) ConfigMapInterface {
	return resource[*v1.ConfigMap, *v1.ConfigMapList]{c.core, "configmaps", namespace,
		func() *v1.ConfigMap { return &v1.ConfigMap{} }, func() *v1.ConfigMapList { return &v1.ConfigMapList{} }}
}
func (c *Client) PersistentVolumeClaims(namespace string) PersistentVolumeClaimInterface {
	return resource[*v1.PersistentVolumeClaim, *v1.PersistentVolumeClaimList]{c.core, "persistentvolumeclaims", namespace,
		func() *v1.PersistentVolumeClaim { return &v1.PersistentVolumeClaim{} },
		func() *v1.PersistentVolumeClaimList { return &v1.PersistentVolumeClaimList{} }}
}
func (c *Client) PersistentVolumes() PersistentVolumeInterface {
	return resource[*v1.PersistentVolume, *v1.PersistentVolumeList]{c.core, "persistentvolumes", "",
		func() *v1.PersistentVolume { return &v1.PersistentVolume{} }, func() *v1.PersistentVolumeList { return &v1.PersistentVolumeList{} }}
}
func (c *Client) ServiceAccounts(namespace string) ServiceAccountInterface {
	return serviceAccounts{c.core, namespace}
}
func (c *Client) Events(namespace string) EventInterface {
	return resource[*v1.Event, *v1.EventList]{c.core, "events", namespace,
		func() *v1.Event { return &v1.Event{} }, func() *v1.EventList { return &v1.EventList{} }}
}
func (c *Client) RuntimeClasses() RuntimeClassInterface {
	return resource[*nodev1.RuntimeClass, *nodev1.RuntimeClassList]{c.node, "runtimeclasses", "",
		func() *nodev1.RuntimeClass { return &nodev1.RuntimeClass{} }, func() *nodev1.RuntimeClassList { return &nodev1.RuntimeClassList{} }}
}
func (c *Client) TokenReviews() TokenReviewInterface {
	return resource[*authnv1.TokenReview, *authnv1.TokenReview]{c.authn, "tokenreviews", "",
		func() *authnv1.TokenReview { return &authnv1.TokenReview{} }, nil}
}
func (c *Client) SubjectAccessReviews() SubjectAccessReviewInterface {
	return resource[*authzv1.SubjectAccessReview, *authzv1.SubjectAccessReview]{c.authz, "subjectaccessreviews", "",
		func() *authzv1.SubjectAccessReview { return &authzv1.SubjectAccessReview{} }, nil}
}
func (c *Client) CertificateSigningRequests() CertificateSigningRequestInterface {
	return resource[*certificatesv1.CertificateSigningRequest, *certificatesv1.CertificateSigningRequestList]{c.certificates,
		"certificatesigningrequests", "", func() *certificatesv1.CertificateSigningRequest { return &certificatesv1.CertificateSigningRequest{} },
		func() *certificatesv1.CertificateSigningRequestList {
			return &certificatesv1.CertificateSigningRequestList{}
		}}
}

func newPod() *v1.Pod           { return &v1.Pod{} }
func newPodList() *v1.PodList   { return &v1.PodList{} }
func newNode() *v1.Node         { return &v1.Node{} }
func newNodeList() *v1.NodeList { return &v1.NodeList{} }

type object interface {
	runtime.Object
	GetName() string
}

// resource speaks the apiserver's REST conventions for one resource, as client-go's generated
// typed clients do: the same paths, query parameters, bodies and subresources.
type resource[T object, L runtime.Object] struct {
	client    rest.Interface
	name      string
	namespace string
	newObj    func() T
	newList   func() L
}

func (r resource[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.newObj()
	err := r.client.Get().NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).Name(name).
		VersionedParams(&opts, parameters.Get()).Do(ctx).Into(out)
	return out, err
}

func (r resource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.newList()
	err := r.client.Get().NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).
		VersionedParams(&opts, parameters.Get()).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (r resource[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.client.Get().NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).
		VersionedParams(&opts, parameters.Get()).Timeout(timeout(opts)).Watch(ctx)
}

func (r resource[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.newObj()
	err := r.client.Post().NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).
		VersionedParams(&opts, parameters.Get()).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r resource[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return r.put(ctx, obj, opts, "")
}

func (r resource[T, L]) UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return r.put(ctx, obj, opts, "status")
}

func (r resource[T, L]) put(ctx context.Context, obj T, opts metav1.UpdateOptions, sub string) (T, error) {
	out := r.newObj()
	req := r.client.Put().NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).Name(obj.GetName())
	if sub != "" {
		req = req.SubResource(sub)
	}
	err := req.VersionedParams(&opts, parameters.Get()).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r resource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.client.Delete().NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).Name(name).
		Body(&opts).Do(ctx).Error()
}

func (r resource[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := r.newObj()
	err := r.client.Patch(pt).NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).Name(name).
		SubResource(subresources...).VersionedParams(&opts, parameters.Get()).Body(data).Do(ctx).Into(out)
	return out, err
}

type serviceAccounts struct {
	client    rest.Interface
	namespace string
}

func (s serviceAccounts) CreateToken(ctx context.Context, name string, tr *authnv1.TokenRequest, opts metav1.CreateOptions) (*authnv1.TokenRequest, error) {
	out := &authnv1.TokenRequest{}
	err := s.client.Post().Namespace(s.namespace).Resource("serviceaccounts").Name(name).SubResource("token").
		VersionedParams(&opts, parameters.Get()).Body(tr).Do(ctx).Into(out)
	return out, err
}

// timeout is a list's or watch's server-side timeout, applied on the client side too.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds != nil {
		return time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	return 0
}
