package podmanager

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/kubeclient"
)

// MirrorClient creates and deletes mirror pods: read-only copies of static pods in the apiserver, so a
// cluster sees what the node runs on its own. Node ownership makes them go when the Node goes.
type MirrorClient struct {
	Client interface {
		Pods(namespace string) kubeclient.PodInterface
	}
	NodeName string
	NodeUID  func() types.UID // may return "" before the Node is registered
}

// CreateMirrorPod creates the mirror of a static pod.
func (c *MirrorClient) CreateMirrorPod(ctx context.Context, pod *v1.Pod) error {
	mirror := pod.DeepCopy()
	mirror.UID = ""
	mirror.ResourceVersion = ""
	mirror.Status = v1.PodStatus{}
	mirror.Annotations = map[string]string{}
	for k, v := range pod.Annotations {
		mirror.Annotations[k] = v
	}
	mirror.Annotations[configMirrorAnnotation] = pod.Annotations[configHashAnnotation]
	if c.NodeUID != nil {
		if uid := c.NodeUID(); uid != "" {
			ctrl := true
			mirror.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: c.NodeName, UID: uid, Controller: &ctrl}}
		}
	}
	_, err := c.Client.Pods(mirror.Namespace).Create(ctx, mirror, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create mirror pod %s/%s: %w", mirror.Namespace, mirror.Name, err)
	}
	return nil
}

// DeleteMirrorPod deletes a mirror pod; uid, when set, guards against deleting a newer one.
func (c *MirrorClient) DeleteMirrorPod(ctx context.Context, name, namespace string, uid *types.UID) error {
	zero := int64(0)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	if uid != nil {
		opts.Preconditions = &metav1.Preconditions{UID: uid}
	}
	err := c.Client.Pods(namespace).Delete(ctx, name, opts)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
