// Package kubefake lets tests hand a client-go fake clientset to the agent's parts, which take
// narrow interfaces shaped like agent/kubeclient rather than the generated clientset (so the
// production binary does not link it).
package kubefake

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/agent/kubeclient"
)

// Client exposes a clientset's typed clients under kubeclient's accessors; the embedded clientset
// stays reachable for the tests' own checks (client.CoreV1()…).
type Client struct {
	kubernetes.Interface
}

// Wrap adapts c.
func Wrap(c kubernetes.Interface) *Client { return &Client{c} }

// New is Wrap(fake.NewClientset(objects...)).
func New(objects ...runtime.Object) *Client { return Wrap(fake.NewClientset(objects...)) }

// IsWatchListSemanticsUnSupported tells client-go's reflector, as the fake clientset itself does,
// that the fake cannot stream a watch-list.
func (c *Client) IsWatchListSemanticsUnSupported() bool {
	u, ok := c.Interface.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

func (c *Client) Pods(ns string) kubeclient.PodInterface { return c.CoreV1().Pods(ns) }
func (c *Client) Nodes() kubeclient.NodeInterface        { return c.CoreV1().Nodes() }
func (c *Client) Leases(ns string) kubeclient.LeaseInterface {
	return c.CoordinationV1().Leases(ns)
}
func (c *Client) Services(ns string) kubeclient.ServiceInterface { return c.CoreV1().Services(ns) }
func (c *Client) Secrets(ns string) kubeclient.SecretInterface   { return c.CoreV1().Secrets(ns) }
func (c *Client) PersistentVolumeClaims(ns string) kubeclient.PersistentVolumeClaimInterface {
	return c.CoreV1().PersistentVolumeClaims(ns)
}
func (c *Client) PersistentVolumes() kubeclient.PersistentVolumeInterface {
	return c.CoreV1().PersistentVolumes()
}
func (c *Client) ConfigMaps(ns string) kubeclient.ConfigMapInterface {
	return c.CoreV1().ConfigMaps(ns)
}
func (c *Client) ServiceAccounts(ns string) kubeclient.ServiceAccountInterface {
	return c.CoreV1().ServiceAccounts(ns)
}
func (c *Client) Events(ns string) kubeclient.EventInterface { return c.CoreV1().Events(ns) }
func (c *Client) RuntimeClasses() kubeclient.RuntimeClassInterface {
	return c.NodeV1().RuntimeClasses()
}
func (c *Client) TokenReviews() kubeclient.TokenReviewInterface {
	return c.AuthenticationV1().TokenReviews()
}
func (c *Client) SubjectAccessReviews() kubeclient.SubjectAccessReviewInterface {
	return c.AuthorizationV1().SubjectAccessReviews()
}
func (c *Client) CSINodes() kubeclient.CSINodeInterface     { return c.StorageV1().CSINodes() }
func (c *Client) CSIDrivers() kubeclient.CSIDriverInterface { return c.StorageV1().CSIDrivers() }
func (c *Client) VolumeAttachments() kubeclient.VolumeAttachmentInterface {
	return c.StorageV1().VolumeAttachments()
}
func (c *Client) CertificateSigningRequests() kubeclient.CertificateSigningRequestInterface {
	return c.CertificatesV1().CertificateSigningRequests()
}
