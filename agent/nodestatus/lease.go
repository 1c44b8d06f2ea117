package nodestatus

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RenewLease creates or renews the node's Lease.
func (m *Manager) RenewLease(ctx context.Context) error {
	leases := m.Client.Leases(LeaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	holder := m.NodeName
	dur := m.LeaseDurationSeconds
	lease, err := leases.Get(ctx, m.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: m.NodeName, Namespace: LeaseNamespace},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now},
		}
		if uid := m.NodeUID(); uid != "" {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: m.NodeName, UID: uid}}
		}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = &holder, &dur, &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}
