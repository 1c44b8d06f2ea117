package metrics

import (
	"crypto/tls"
	"crypto/x509"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"math"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func gather(t *testing.T, name string) []*dto.Metric {
	t.Helper()
	mfs, err := Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

func TestServingCertificateSeries(t *testing.T) {
	var cur *tls.Certificate
	ServingCertificate(func() *tls.Certificate { return cur })
	if m := gather(t, "kubelet_certificate_manager_server_ttl_seconds"); len(m) != 1 || !math.IsInf(m[0].GetGauge().GetValue(), 1) {
		t.Fatalf("without a certificate: %v, want +Inf", m)
	}
	cur = &tls.Certificate{Leaf: &x509.Certificate{NotAfter: time.Now().Add(time.Hour + time.Minute)}}
	if m := gather(t, "kubelet_certificate_manager_server_ttl_seconds"); len(m) != 1 || m[0].GetGauge().GetValue() < 3600 || m[0].GetGauge().GetValue() > 3660 {
		t.Fatalf("an hour left: %v", m)
	}
	ServingRenewFailed()
	ServingRotated(2 * time.Hour)
	if m := gather(t, "kubelet_server_expiration_renew_errors"); len(m) != 1 || m[0].GetCounter().GetValue() != 1 {
		t.Errorf("renew errors %v", m)
	}
	if m := gather(t, "kubelet_certificate_manager_server_rotation_seconds"); len(m) != 1 || m[0].GetHistogram().GetSampleCount() != 1 {
		t.Errorf("rotations %v", m)
	}
}

func TestVolumeStatsOfClaims(t *testing.T) {
	capacity, avail, used, inodes, free, usedInodes := uint64(1<<30), uint64(1<<29), uint64(1<<29), uint64(100), uint64(60), uint64(40)
	VolumeStats(func() []VolumeClaim {
		return []VolumeClaim{{Namespace: "db", Claim: "data", FS: statsapi.FsStats{CapacityBytes: &capacity, AvailableBytes: &avail,
			UsedBytes: &used, Inodes: &inodes, InodesFree: &free, InodesUsed: &usedInodes}},
			{Namespace: "db", Claim: "bytes-only", FS: statsapi.FsStats{CapacityBytes: &capacity}}}
	})
	want := map[string]float64{"capacity_bytes": 1 << 30, "available_bytes": 1 << 29, "used_bytes": 1 << 29, "inodes": 100,
		"inodes_free": 60, "inodes_used": 40}
	for name, v := range want {
		m := gather(t, "kubelet_volume_stats_"+name)
		if name == "capacity_bytes" {
			if len(m) != 2 {
				t.Fatalf("%s: %v, want both claims", name, m)
			}
			m = m[1:] // sorted by label: bytes-only, then data
		}
		if len(m) != 1 {
			t.Fatalf("%s: %v, want only the claim measured so", name, m)
		}
		var labels []string
		for _, l := range m[0].GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		if got := strings.Join(labels, ","); got != "namespace=db,persistentvolumeclaim=data" {
			t.Errorf("%s labels %s", name, got)
		}
		if m[0].GetGauge().GetValue() != v {
			t.Errorf("%s = %v, want %v", name, m[0].GetGauge().GetValue(), v)
		}
	}
}
