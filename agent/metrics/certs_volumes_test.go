package metrics

import (
	"crypto/tls"
	"crypto/x509"
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

func TestVolumeStatsOfLocalClaims(t *testing.T) {
	dir := t.TempDir()
	VolumeStats(func() []VolumeClaim {
		return []VolumeClaim{{Namespace: "db", Claim: "data", Path: dir}, {Namespace: "db", Claim: "gone", Path: dir + "/missing"}}
	})
	for _, name := range []string{"capacity_bytes", "available_bytes", "used_bytes", "inodes", "inodes_free", "inodes_used"} {
		m := gather(t, "kubelet_volume_stats_"+name)
		if len(m) != 1 {
			t.Fatalf("%s: %v, want the one claim that can be measured", name, m)
		}
		var labels []string
		for _, l := range m[0].GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		if got := strings.Join(labels, ","); got != "namespace=db,persistentvolumeclaim=data" {
			t.Errorf("%s labels %s", name, got)
		}
		if name == "capacity_bytes" && m[0].GetGauge().GetValue() <= 0 {
			t.Errorf("capacity %v", m[0].GetGauge().GetValue())
		}
	}
}
