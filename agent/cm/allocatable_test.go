package cm

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/agent/eviction"
)

func rl(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func hard(t *testing.T, m map[string]string) []eviction.Threshold {
	t.Helper()
	ts, err := eviction.ParseThresholds(eviction.Settings{Hard: m})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// same compares by value: 1Gi and 1073741824 are the same amount.
func same(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if r, ok := b[k]; !ok || q.Cmp(r) != 0 {
			return false
		}
	}
	return true
}

func show(l v1.ResourceList) string {
	var s []string
	for _, n := range sortedNames(l) {
		q := l[n]
		s = append(s, string(n)+"="+q.String())
	}
	return strings.Join(s, ",")
}

func TestAllocatable(t *testing.T) {
	capacity := rl("cpu", "4", "memory", "8Gi", "pods", "110", "ephemeral-storage", "100Gi", "hugepages-2Mi", "0")
	for name, tc := range []struct {
		name            string
		capacity        v1.ResourceList
		system, kube    v1.ResourceList
		hard            map[string]string
		soft            bool
		wantReserved    v1.ResourceList
		wantAllocatable v1.ResourceList
	}{
		{name: "nothing reserved", capacity: capacity,
			wantReserved:    rl(),
			wantAllocatable: capacity},
		{name: "the kubelet's default hard thresholds", capacity: capacity,
			hard:            map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "imagefs.available": "15%", "nodefs.inodesFree": "5%"},
			wantReserved:    rl("memory", "100Mi", "ephemeral-storage", "10Gi"),
			wantAllocatable: rl("cpu", "4", "memory", "8092Mi", "pods", "110", "ephemeral-storage", "90Gi", "hugepages-2Mi", "0")},
		{name: "system and kube reserved add up with eviction", capacity: capacity,
			system:          rl("cpu", "500m", "memory", "1Gi", "pid", "1000"),
			kube:            rl("cpu", "250m", "memory", "512Mi", "ephemeral-storage", "1Gi"),
			hard:            map[string]string{"memory.available": "5%"},
			wantReserved:    rl("cpu", "750m", "memory", "2040109465", "ephemeral-storage", "1Gi"),
			wantAllocatable: rl("cpu", "3250m", "memory", "6549825127", "pods", "110", "ephemeral-storage", "99Gi", "hugepages-2Mi", "0")},
		{name: "soft thresholds reserve nothing", capacity: capacity, soft: true,
			hard:            map[string]string{"memory.available": "1Gi"},
			wantReserved:    rl(),
			wantAllocatable: capacity},
		{name: "huge pages come out of memory", capacity: rl("cpu", "2", "memory", "4Gi", "pods", "10", "hugepages-2Mi", "512Mi", "hugepages-1Gi", "1Gi"),
			system:          rl("memory", "256Mi"),
			wantReserved:    rl("memory", "256Mi"),
			wantAllocatable: rl("cpu", "2", "memory", "2304Mi", "pods", "10", "hugepages-2Mi", "512Mi", "hugepages-1Gi", "1Gi")},
		{name: "never below zero", capacity: rl("cpu", "1", "memory", "1Gi", "pods", "10"),
			system:          rl("cpu", "2"),
			wantReserved:    rl("cpu", "2"),
			wantAllocatable: rl("cpu", "0", "memory", "1Gi", "pods", "10")},
		{name: "no ephemeral-storage capacity, nodefs reserves nothing", capacity: rl("cpu", "1", "memory", "1Gi", "pods", "10"),
			hard:            map[string]string{"nodefs.available": "10%"},
			wantReserved:    rl(),
			wantAllocatable: rl("cpu", "1", "memory", "1Gi", "pods", "10")},
	} {
		_ = name
		t.Run(tc.name, func(t *testing.T) {
			var ts []eviction.Threshold
			if tc.soft {
				var err error
				ts, err = eviction.ParseThresholds(eviction.Settings{Soft: tc.hard, SoftGracePeriod: map[string]string{"memory.available": "1m"}})
				if err != nil {
					t.Fatal(err)
				}
			} else if tc.hard != nil {
				ts = hard(t, tc.hard)
			}
			r := Reservation(tc.capacity, tc.system, tc.kube, ts)
			if !same(r, tc.wantReserved) {
				t.Errorf("reservation %s, want %s", show(r), show(tc.wantReserved))
			}
			if a := Allocatable(tc.capacity, r); !same(a, tc.wantAllocatable) {
				t.Errorf("allocatable %s, want %s", show(a), show(tc.wantAllocatable))
			}
		})
	}
}

func TestCheckReservation(t *testing.T) {
	capacity := rl("cpu", "2", "memory", "4Gi", "pods", "110")
	if err := CheckReservation(capacity, rl("cpu", "2", "memory", "1Gi")); err != nil {
		t.Errorf("reserving all of a resource is allowed: %v", err)
	}
	err := CheckReservation(capacity, rl("cpu", "3", "memory", "5Gi"))
	if err == nil || !strings.Contains(err.Error(), "cpu: reserved 3") || !strings.Contains(err.Error(), "memory: reserved 5Gi") {
		t.Errorf("err %v, want both resources named", err)
	}
}

func TestPodsLimits(t *testing.T) {
	internal := rl("cpu", "4", "memory", "8Gi", "pods", "110", "ephemeral-storage", "100Gi", "pid", "32768", "hugepages-2Mi", "64Mi")
	system, kube := rl("cpu", "500m", "memory", "1Gi", "pid", "1000"), rl("memory", "512Mi", "ephemeral-storage", "1Gi")
	for _, tc := range []struct {
		enforce bool
		want    v1.ResourceList
	}{
		// Not enforced: capped at capacity, so the cgroup's shares are not the kernel's default 1024.
		{false, rl("cpu", "4", "memory", "8Gi", "pid", "32768", "hugepages-2Mi", "64Mi")},
		// Enforced: less the reservations, but not less the eviction thresholds.
		{true, rl("cpu", "3500m", "memory", "6656Mi", "pid", "31768", "hugepages-2Mi", "64Mi")},
	} {
		if got := PodsLimits(internal, system, kube, tc.enforce); !same(got, tc.want) {
			t.Errorf("enforce %v: %s, want %s", tc.enforce, show(got), show(tc.want))
		}
	}
}

func TestLimitsFor(t *testing.T) {
	l := LimitsFor(rl("cpu", "3500m", "memory", "1Gi", "pid", "100", "hugepages-2Mi", "64Mi", "hugepages-1Gi", "2Gi"), false)
	if *l.CPUShares != 3584 || *l.Memory != 1<<30 || *l.Pids != 100 || l.HugePages[2<<20] != 64<<20 || l.HugePages[1<<30] != 2<<30 {
		t.Errorf("limits %+v", l)
	}
	c := LimitsFor(rl("cpu", "1", "memory", "1Gi"), true)
	if *c.CPUShares != 1024 || c.Memory != nil || c.Pids != nil {
		t.Errorf("compressible only: %+v", c)
	}
}

func TestShares(t *testing.T) {
	for _, tc := range []struct {
		milli  int64
		shares uint64
		weight uint64
	}{
		{0, 2, 1},
		{1, 2, 1},
		{10, 10, 1},
		{100, 102, 4},
		{1000, 1024, 39},
		{2500, 2560, 98},
		{300000, 262144, 10000},
	} {
		s := MilliCPUToShares(tc.milli)
		if s != tc.shares || SharesToWeight(s) != tc.weight {
			t.Errorf("%dm: shares %d weight %d, want %d %d", tc.milli, s, SharesToWeight(s), tc.shares, tc.weight)
		}
	}
}

func TestPageSizeName(t *testing.T) {
	for size, want := range map[int64]string{2 << 20: "2MB", 1 << 30: "1GB", 64 << 10: "64KB", 16 << 30: "16GB"} {
		if got := pageSizeName(size); got != want {
			t.Errorf("%d: %s, want %s", size, got, want)
		}
	}
}

func TestParseReservation(t *testing.T) {
	got, err := ParseReservation("systemReserved", map[string]string{"cpu": "100m", "memory": "1Gi", "ephemeral-storage": "2Gi", "pid": "500"})
	if err != nil || !same(got, rl("cpu", "100m", "memory", "1Gi", "ephemeral-storage", "2Gi", "pid", "500")) {
		t.Errorf("%s %v", show(got), err)
	}
	for in, want := range map[string]string{
		"hugepages-2Mi=1Gi": `cannot reserve "hugepages-2Mi"`,
		"memory=-1Gi":       "must not be negative",
		"cpu=lots":          `cpu "lots"`,
	} {
		k, v, _ := strings.Cut(in, "=")
		if _, err := ParseReservation("kubeReserved", map[string]string{k: v}); err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "kubeReserved") {
			t.Errorf("%s: err %v, want %q", in, err, want)
		}
	}
}

func TestCheckEnforcement(t *testing.T) {
	res := rl("cpu", "1")
	for _, tc := range []struct {
		keys       []string
		perQOS     bool
		sys, kube  string
		sysR, kubR v1.ResourceList
		want       string
	}{
		{keys: nil, want: ""},
		{keys: []string{"none"}, want: ""},
		{keys: []string{"pods"}, perQOS: true, want: ""},
		{keys: []string{"pods", "system-reserved", "kube-reserved-compressible"}, perQOS: true, sys: "/system.slice", kube: "/kube", sysR: res, kubR: res, want: ""},
		{keys: []string{"pods"}, want: "cgroupsPerQOS"},
		{keys: []string{"pods", "none"}, perQOS: true, want: "none cannot be combined"},
		{keys: []string{"cpus"}, want: `unknown key "cpus"`},
		{keys: []string{"system-reserved"}, sysR: res, want: "needs systemReservedCgroup"},
		{keys: []string{"kube-reserved"}, kube: "/kube", want: "without a reservation"},
		{keys: []string{"kube-reserved"}, kube: "kube", kubR: res, want: "absolute"},
		{keys: []string{"system-reserved", "system-reserved-compressible"}, sys: "/s", sysR: res, want: "cannot both"},
	} {
		err := CheckEnforcement(tc.keys, tc.perQOS, tc.sys, tc.kube, tc.sysR, tc.kubR)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: err %v, want %q", tc.keys, err, tc.want)
		}
	}
}
