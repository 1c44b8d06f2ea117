package nodestatus

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RenewLease creates or renews the node's Lease. As the kubelet's lease controller, it renews the
// Lease as last written, with no read before; only a failed renewal (a conflict, the Lease gone)
// reads it again, or creates it.
func (m *Manager) RenewLease(ctx context.Context) error {
	m.mu.Lock()
	last := m.lease
	m.mu.Unlock()
	if last != nil {
		if err := m.writeLease(ctx, last.DeepCopy()); err == nil {
			return nil
		}
	}
	leases := m.Client.Leases(LeaseNamespace)
	lease, err := leases.Get(ctx, m.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		holder, dur, now := m.NodeName, m.LeaseDurationSeconds, metav1.NewMicroTime(time.Now())
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: m.NodeName, Namespace: LeaseNamespace},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now},
		}
		m.ownLease(l)
		created, err := leases.Create(ctx, l, metav1.CreateOptions{})
		m.keepLease(created, err)
		return err
	}
	if err != nil {
		m.keepLease(nil, err)
		return err
	}
	return m.writeLease(ctx, lease)
}

// writeLease renews lease and keeps what the apiserver answered for the next renewal.
func (m *Manager) writeLease(ctx context.Context, lease *coordinationv1.Lease) error {
	holder, dur, now := m.NodeName, m.LeaseDurationSeconds, metav1.NewMicroTime(time.Now())
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = &holder, &dur, &now
	m.ownLease(lease)
	updated, err := m.Client.Leases(LeaseNamespace).Update(ctx, lease, metav1.UpdateOptions{})
	m.keepLease(updated, err)
	return err
}

// ownLease makes the Node the Lease's owner once the Node's UID is known, so the Lease goes with it.
func (m *Manager) ownLease(l *coordinationv1.Lease) {
	if uid := m.NodeUID(); uid != "" && len(l.OwnerReferences) == 0 {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: m.NodeName, UID: uid}}
	}
}

func (m *Manager) keepLease(l *coordinationv1.Lease, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil || l == nil || l.Name == "" {
		m.lease = nil
		return
	}
	m.lease = l
}
